// Bulk imports in cluster mode (docs/events.md, "Bulk import"): an import runs on the node that took its
// upload (the body kept in that node's data folder, its job in its store, resumed there after a
// restart), each row sent to the owner of its visitor's or profile's partition (actors/actor-router.ts),
// sent again while no node can take it (a partition changing owner). Its id names the node
// (src/cluster/node-jobs.ts): any node reads it with a call to that node, and the list asks every live
// node. A node that is down answers nothing: its imports, and the list, are a 503 until it is back.

import { askEveryNode, type PeerCalls } from '../cluster/node-listing.js'
import { jobNode } from '../cluster/node-jobs.js'
import type { ImportJob, ImportJobs, ImportService } from './import-jobs.js'

interface ByAccount { account: string }
interface ById { account: string, id: string }

export class ClusterImports implements ImportService {
  private readonly local: ImportJobs
  private readonly calls: PeerCalls
  private readonly nodeId: string

  constructor (local: ImportJobs, calls: PeerCalls, nodeId: string) {
    this.local = local
    this.calls = calls
    this.nodeId = nodeId
    calls.serve('imports.list', async payload => this.local.list((payload as ByAccount).account))
    calls.serve('imports.get', async payload => this.local.get((payload as ById).account, (payload as ById).id))
  }

  create (account: string, body: AsyncIterable<Buffer>, deliver: boolean): Promise<ImportJob> {
    return this.local.create(account, body, deliver)
  }

  async get (account: string, id: string): Promise<ImportJob | null> {
    const node = jobNode(id, this.calls, this.nodeId, 'import_not_found')
    return node === this.nodeId ? this.local.get(account, id) : await this.calls.call(node, 'imports.get', { account, id } satisfies ById) as ImportJob | null
  }

  /** Every live node's imports of the account, newest first. */
  async list (account: string): Promise<ImportJob[]> {
    const answers = await askEveryNode<ImportJob[]>(this.calls, 'imports.list', () => ({ account } satisfies ByAccount))
    return answers.flatMap(({ answer }) => answer).sort((a, b) => b.createdAt.localeCompare(a.createdAt))
  }
}
