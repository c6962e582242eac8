// The deliveries log of a whole cluster (cluster mode): a delivery record lives in the LMDB of the node
// that relayed it, so the node that takes an admin request asks every live node for its part over NATS
// (src/cluster/node-calls.ts) and answers as if the log were one.
//
// Listing: each live node answers its own page (its records in seq order, which is its creation
// order) from its position in the cursor; the pages are merged oldest first (creation time, ties by
// node id, then seq) by src/cluster/node-listing.ts, whose opaque cursor holds every node's position:
// following `next` lists each record of the cluster exactly once. A node that does not answer makes
// the whole listing a 503 (never a partial page).
//
// Replay by ids: every live node says which of the ids it holds (a cluster delivery id names its node:
// `<node>:<seq>.<webhook>`, and only that node holds it); an id no node holds is refused (400) before
// anything is replayed; then each holder replays its own. By time range: every node replays its own dead
// records, the answer is their sum (a node that does not answer: 503, the others' replays stand; a
// retry replays only what is still dead).

import { askEveryNode, listAcrossNodes, sizedItems, type PeerCalls } from '../cluster/node-listing.js'
import { unknownDelivery } from './history.js'
import type { DeliveryHub } from './hub.js'
import type { DeliveryRecord, DeliveryStatus } from './record.js'

export interface ClusterDeliveriesOptions {
  hub: Pick<DeliveryHub, 'list' | 'held' | 'replay'>
  calls: PeerCalls
}

/** A page as one node answers it. */
interface NodePage { deliveries: DeliveryRecord[], next: number | null }
interface ListCall { account: string, webhookId: string, status: DeliveryStatus | null, after: number, limit: number }
interface HeldCall { account: string, webhookId: string, ids: string[] }
interface ReplayCall { account: string, webhookId: string, ids: string[] | null, fromMs: number, toMs: number }

export class ClusterDeliveries {
  private readonly hub: ClusterDeliveriesOptions['hub']
  private readonly calls: PeerCalls

  constructor ({ hub, calls }: ClusterDeliveriesOptions) {
    this.hub = hub
    this.calls = calls
    calls.serve('deliveries.list', async payload => {
      const { account, webhookId, status, after, limit } = payload as ListCall
      return sizedPage(await this.hub.list(account, webhookId, status, after, limit))
    })
    calls.serve('deliveries.held', async payload => {
      const { account, webhookId, ids } = payload as HeldCall
      return this.hub.held(account, webhookId, ids)
    })
    calls.serve('deliveries.replay', async payload => {
      const { account, webhookId, ids, fromMs, toMs } = payload as ReplayCall
      return this.hub.replay(account, webhookId, ids, fromMs, toMs)
    })
  }

  /** A page of the cluster's deliveries of a webhook, oldest first; `cursor` is the previous `next` ('' for the first page). */
  async list (account: string, webhookId: string, status: DeliveryStatus | null, cursor: string, limit: number): Promise<{ deliveries: DeliveryRecord[], next: string | null }> {
    const { items, next } = await listAcrossNodes<DeliveryRecord>({
      calls: this.calls, cursor, field: 'after', limit,
      page: async (node, after) => {
        const page = await this.calls.call(node, 'deliveries.list', { account, webhookId, status, after, limit } satisfies ListCall) as NodePage
        return { items: page.deliveries, more: page.next !== null }
      },
      before,
      positionOf: record => record.seq,
    })
    return { deliveries: items.map(({ item }) => item), next }
  }

  /** Re-queue the ids given at the nodes that hold them, or every node's dead records in [fromMs, toMs); how many in all. */
  async replay (account: string, webhookId: string, ids: readonly string[] | null, fromMs: number, toMs: number): Promise<number> {
    const replay = (only: string[] | null): ReplayCall => ({ account, webhookId, ids: only, fromMs, toMs })
    if (ids === null) return sum((await askEveryNode<number>(this.calls, 'deliveries.replay', () => replay(null))).map(({ answer }) => answer))
    const unique = [...new Set(ids)]
    const held = (await askEveryNode<string[]>(this.calls, 'deliveries.held', () => ({ account, webhookId, ids: unique } satisfies HeldCall)))
      .map(({ node, answer }) => ({ node, ids: new Set(answer) }))
    const byNode = new Map<string, string[]>()
    for (const id of unique) {
      const holder = held.find(({ ids }) => ids.has(id))
      if (holder === undefined) throw unknownDelivery(id)
      byNode.set(holder.node, [...byNode.get(holder.node) ?? [], id])
    }
    return sum(await Promise.all([...byNode].map(async ([node, only]) => await this.calls.call(node, 'deliveries.replay', replay(only)) as number)))
  }
}

/** Oldest first: creation time, then node id, then seq. */
function before (a: DeliveryRecord, aNode: string, b: DeliveryRecord, bNode: string): boolean {
  if (a.createdAtMs !== b.createdAtMs) return a.createdAtMs < b.createdAtMs
  if (aNode !== bNode) return aNode < bNode
  return a.seq < b.seq
}

/** A node's page kept under CLUSTER_PAGE_SIZE_MAX_BYTES (as JSON, which msgpack does not exceed): the records past it are left for the next page. */
function sizedPage (page: NodePage): NodePage {
  const deliveries = sizedItems(page.deliveries, record => JSON.stringify(record).length)
  return deliveries.length === page.deliveries.length ? page : { deliveries: [...deliveries], next: deliveries.at(-1)!.seq }
}

function sum (counts: number[]): number {
  return counts.reduce((a, b) => a + b, 0)
}
