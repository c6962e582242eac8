// Replays in cluster mode (docs/event-log.md, "Replay"): a replay runs on the node asked to start it. It
// reads the cluster's event stream (src/cluster/event-stream.ts) and queues its deliveries from that
// node, their records in its LMDB as its live deliveries' are (their outcomes come back to it from
// whichever node attempts them: src/delivery/holder-outcomes.ts). Its id names the node
// (src/cluster/node-jobs.ts), so any node reads or cancels it with a call to that node; the list and the
// running count ask every live node. A node that is down answers nothing: reading or cancelling its
// replays, and listing, is a 503 until it is back, when its replays go on where they stood.

import { askEveryNode, type PeerCalls } from '../cluster/node-listing.js'
import { jobNode } from '../cluster/node-jobs.js'
import { checkRunning, type ReplayRequest, type ReplayRow, type ReplayService, type Replays } from './replay.js'

interface ByAccount { account: string }
interface ById { account: string, id: string }

export class ClusterReplays implements ReplayService {
  private readonly local: Replays
  private readonly calls: PeerCalls
  private readonly nodeId: string

  constructor (local: Replays, calls: PeerCalls, nodeId: string) {
    this.local = local
    this.calls = calls
    this.nodeId = nodeId
    calls.serve('replays.list', async payload => this.local.list((payload as ByAccount).account))
    calls.serve('replays.get', async payload => this.local.get((payload as ById).account, (payload as ById).id))
    calls.serve('replays.cancel', async payload => await this.local.cancel((payload as ById).account, (payload as ById).id))
  }

  /** Started here, once the account runs fewer than REPLAYS_RUNNING_MAX across the cluster. */
  async create (account: string, request: ReplayRequest): Promise<ReplayRow> {
    checkRunning(await this.list(account))
    return await this.local.create(account, request)
  }

  async get (account: string, id: string): Promise<ReplayRow> {
    const node = jobNode(id, this.calls, this.nodeId, 'replay_not_found')
    return node === this.nodeId ? this.local.get(account, id) : await this.calls.call(node, 'replays.get', { account, id } satisfies ById) as ReplayRow
  }

  /** Every live node's replays of the account, newest first. */
  async list (account: string): Promise<ReplayRow[]> {
    const answers = await askEveryNode<ReplayRow[]>(this.calls, 'replays.list', () => ({ account } satisfies ByAccount))
    return answers.flatMap(({ answer }) => answer).sort((a, b) => b.createdAtMs - a.createdAtMs)
  }

  async cancel (account: string, id: string): Promise<ReplayRow> {
    const node = jobNode(id, this.calls, this.nodeId, 'replay_not_found')
    return node === this.nodeId ? await this.local.cancel(account, id) : await this.calls.call(node, 'replays.cancel', { account, id } satisfies ById) as ReplayRow
  }
}
