// ClusterNode.owns on a real NATS server (in-process nodes, a keeper whose recoveries the test ends):
// a partition this node hands over while it still recovers it, then acquires again, is not owned before
// its new recovery ends. Chaos seed 3 (issue 26): node-3 handed over partitions it was recovering at
// start; releasing() cleared 'recovered' before awaiting that recovery, whose end set it again, so when
// node-3 took p0 back after node-1's restart it served p0 at once, on its stale local state, and an
// identify written from that state replaced node-1's two acknowledged purchases.

import { expect } from 'chai'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { ClusterNode, type PartitionKeeper } from '../../src/cluster/node.js'
import { startNatsServer, type NatsServer } from '../helpers/nats-server.js'
import { until } from '../helpers/until.js'

const PARTITIONS = 2
const LEASE_MS = 1500

/** A keeper whose recoveries wait until the test ends them (`finish`); release and lost are at once. */
function heldKeeper (): PartitionKeeper & { recoveries: number[], released: number[], finish: () => void } {
  const waiting: Array<() => void> = []
  const keeper = {
    recoveries: [] as number[],
    released: [] as number[],
    recover (partition: number): Promise<void> {
      keeper.recoveries.push(partition)
      return new Promise<void>(resolve => { waiting.push(resolve) })
    },
    async release (partition: number): Promise<void> { keeper.released.push(partition) },
    lost (): void {},
    finish (): void { for (const resolve of waiting.splice(0)) resolve() },
  }
  return keeper
}

describe('cluster node: ownership across a handover made while recovering (real NATS)', function () {
  this.timeout(90_000)
  let server: NatsServer
  const connections: NatsConnection[] = []
  const nodes: ClusterNode[] = []

  before(async () => { server = await startNatsServer() })
  after(async () => {
    for (const node of nodes) await node.close().catch(() => {})
    for (const nc of connections) await nc.close()
    await server?.close()
  })

  async function open (nodeId: string): Promise<ClusterNode> {
    const nc = await connect({ servers: server.url })
    connections.push(nc)
    const node = await ClusterNode.open({ nc, cluster: 'own', nodeId, partitions: PARTITIONS, replicas: 1, leaseMs: LEASE_MS })
    nodes.push(node)
    return node
  }

  it('does not own a partition it acquires again until that recovery ends', async () => {
    const a = await open('a')
    const keeperA = heldKeeper()
    await a.start(keeperA)
    await until('a recovering both partitions', () => keeperA.recoveries.length === PARTITIONS)

    // b joins: a's share is one partition, and it hands the other over while recovering it.
    const b = await open('b')
    const keeperB = heldKeeper()
    await b.start(keeperB)
    await until('a handing a partition over', () => a.status().nodes.length === 2)
    keeperA.finish()
    await until('a released one partition', () => keeperA.released.length === 1)
    const moved = keeperA.released[0]!
    await until('b recovering it', () => keeperB.recoveries.includes(moved))
    keeperB.finish()
    await until('b owns it', () => b.owns(moved))
    expect(a.owns(moved)).to.equal(false)

    // b leaves: a takes the partition back, and recovers it again before serving it.
    await b.close()
    await until('a recovering it again', () => keeperA.recoveries.filter(p => p === moved).length === 2)
    expect(a.owns(moved), 'owned while its recovery runs').to.equal(false)
    keeperA.finish()
    await until('a owns it once recovered', () => a.owns(moved))
  })
})
