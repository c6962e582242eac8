// A real Ownership (src/cluster/ownership.ts) over a table the test fills: partition → owner node.
// The cluster node answers from its leases; tests of what sits on top (the entity log) set the table.

import type { Ownership } from '../../src/cluster/ownership.js'
import { partitionOf } from '../../src/cluster/partition.js'

export class TableOwnership implements Ownership {
  readonly nodeId: string
  readonly partitions: number
  /** Shared by every node's view in a test: partition → node id. */
  readonly table: Map<number, string>

  constructor (nodeId: string, partitions: number, table: Map<number, string>) {
    this.nodeId = nodeId
    this.partitions = partitions
    this.table = table
  }

  partitionOf (account: string, id: string): number {
    return partitionOf(account, id, this.partitions)
  }

  owns (partition: number): boolean {
    return this.table.get(partition) === this.nodeId
  }

  ownerOf (partition: number): string | null {
    return this.table.get(partition) ?? null
  }

  async ownerReady (partition: number, timeoutMs: number, notNode?: string): Promise<string | null> {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const owner = this.ownerOf(partition)
      if (owner !== null && owner !== notNode) return owner
      if (Date.now() >= deadline) return null
      await new Promise(resolve => setTimeout(resolve, 10))
    }
  }
}
