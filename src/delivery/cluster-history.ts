// The deliveries log of a whole cluster (cluster mode): a delivery record lives in the LMDB of the node
// that relayed it, so the node that takes an admin request asks every live node for its part over NATS
// (src/cluster/node-calls.ts) and answers as if the log were one.
//
// Listing: each live node answers its own page (its records in seq order, which is its creation
// order) from its position in the cursor; the pages are merged oldest first (creation time, ties by
// node id, then seq) and at most `limit` records are answered, with a cursor holding every node's
// position (the seq of the last record of it taken). Following `next` thus lists each record of the
// cluster exactly once, whatever the merge order. The cursor is opaque to clients: `base64url` of
// JSON `{"v":1,"p":{"<node id>":<seq>,…}}`; a node absent from it starts from its first record. A node
// that does not answer makes the whole listing a 503 (never a partial page).
//
// Replay by ids: every live node says which of the ids it holds (a cluster delivery id names its node:
// `<node>:<seq>.<webhook>`, and only that node holds it); an id no node holds is refused (400) before
// anything is replayed; then each holder replays its own. By time range: every node replays its own dead
// records, the answer is their sum (a node that does not answer: 503, the others' replays stand; a
// retry replays only what is still dead).

import { ApiError } from '../errors.js'
import { unknownDelivery } from './history.js'
import type { DeliveryHub } from './hub.js'
import { CLUSTER_CURSOR_LENGTH_MAX, CLUSTER_PAGE_SIZE_MAX_BYTES } from './limits.js'
import type { DeliveryRecord, DeliveryStatus } from './record.js'

/** Calls to named nodes (src/cluster/node-calls.ts implements it). */
export interface PeerCalls {
  /** The live nodes' ids, this node among them. */
  nodes: () => string[]
  /** Rejects with the node's ApiError, or 503 unavailable when it did not answer in time. */
  call: (node: string, method: string, payload: unknown) => Promise<unknown>
  serve: (method: string, handler: (payload: unknown) => Promise<unknown>) => void
}

export interface ClusterDeliveriesOptions {
  hub: Pick<DeliveryHub, 'list' | 'held' | 'replay'>
  calls: PeerCalls
}

/** A page as one node answers it. */
interface NodePage { deliveries: DeliveryRecord[], next: number | null }
interface ListCall { account: string, webhookId: string, status: DeliveryStatus | null, after: number, limit: number }
interface HeldCall { account: string, webhookId: string, ids: string[] }
interface ReplayCall { account: string, webhookId: string, ids: string[] | null, fromMs: number, toMs: number }

const CURSOR_VERSION = 1
const NODE_ID = /^[A-Za-z0-9_-]{1,64}$/

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
    const positions = readCursor(cursor)
    const nodes = this.calls.nodes()
    const pages = await Promise.all(nodes.map(async node => {
      const call: ListCall = { account, webhookId, status, after: positions.get(node) ?? 0, limit }
      return { node, page: await this.calls.call(node, 'deliveries.list', call) as NodePage, taken: 0 }
    }))
    const deliveries: DeliveryRecord[] = []
    while (deliveries.length < limit) {
      // A node with more records than it sent may have one older than any other's head: stop there.
      if (pages.some(({ page, taken }) => taken === page.deliveries.length && page.next !== null)) break
      let oldest: typeof pages[number] | null = null
      for (const entry of pages) {
        if (entry.taken === entry.page.deliveries.length) continue
        if (oldest === null || before(entry.page.deliveries[entry.taken]!, entry.node, oldest.page.deliveries[oldest.taken]!, oldest.node)) oldest = entry
      }
      if (oldest === null) break
      const record = oldest.page.deliveries[oldest.taken++]!
      positions.set(oldest.node, record.seq)
      deliveries.push(record)
    }
    const done = pages.every(({ page, taken }) => taken === page.deliveries.length && page.next === null)
    return { deliveries, next: done ? null : writeCursor(positions) }
  }

  /** Re-queue the ids given at the nodes that hold them, or every node's dead records in [fromMs, toMs); how many in all. */
  async replay (account: string, webhookId: string, ids: readonly string[] | null, fromMs: number, toMs: number): Promise<number> {
    const nodes = this.calls.nodes()
    const replayAt = (node: string, only: string[] | null): Promise<number> =>
      this.calls.call(node, 'deliveries.replay', { account, webhookId, ids: only, fromMs, toMs } satisfies ReplayCall) as Promise<number>
    if (ids === null) return sum(await Promise.all(nodes.map(node => replayAt(node, null))))
    const unique = [...new Set(ids)]
    const held = await Promise.all(nodes.map(async node => new Set(await this.calls.call(node, 'deliveries.held', { account, webhookId, ids: unique } satisfies HeldCall) as string[])))
    const byNode = new Map<string, string[]>()
    for (const id of unique) {
      const at = nodes.findIndex((_, i) => held[i]!.has(id))
      if (at === -1) throw unknownDelivery(id)
      const node = nodes[at]!
      byNode.set(node, [...byNode.get(node) ?? [], id])
    }
    return sum(await Promise.all([...byNode].map(([node, only]) => replayAt(node, only))))
  }
}

/** Oldest first: creation time, then node id, then seq. */
function before (a: DeliveryRecord, aNode: string, b: DeliveryRecord, bNode: string): boolean {
  if (a.createdAtMs !== b.createdAtMs) return a.createdAtMs < b.createdAtMs
  if (aNode !== bNode) return aNode < bNode
  return a.seq < b.seq
}

/**
 * A node's page kept under CLUSTER_PAGE_SIZE_MAX_BYTES (as JSON, which msgpack does not exceed), so
 * that it travels as one NATS message: the records past it are left for the next page.
 */
function sizedPage (page: NodePage): NodePage {
  let bytes = 0
  for (const [i, record] of page.deliveries.entries()) {
    bytes += JSON.stringify(record).length
    if (bytes > CLUSTER_PAGE_SIZE_MAX_BYTES && i > 0) return { deliveries: page.deliveries.slice(0, i), next: page.deliveries[i - 1]!.seq }
  }
  return page
}

function sum (counts: number[]): number {
  return counts.reduce((a, b) => a + b, 0)
}

/**
 * The positions a cursor holds: none for '' (and '0', the embedded mode's first page, so a client
 * written for it starts the same way); 400 invalid_field for anything writeCursor did not make.
 */
export function readCursor (cursor: string): Map<string, number> {
  const positions = new Map<string, number>()
  if (cursor === '' || cursor === '0') return positions
  const refuse = (): ApiError => new ApiError('invalid_field', 'after must be the next of a previous page of this listing (in cluster mode an opaque string), or omitted for the first page.', '/after')
  if (cursor.length > CLUSTER_CURSOR_LENGTH_MAX || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw refuse()
  let parsed: unknown
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'))
  } catch {
    throw refuse()
  }
  if (typeof parsed !== 'object' || parsed === null || (parsed as { v?: unknown }).v !== CURSOR_VERSION) throw refuse()
  const p = (parsed as { p?: unknown }).p
  if (typeof p !== 'object' || p === null || Array.isArray(p)) throw refuse()
  for (const [node, seq] of Object.entries(p)) {
    if (!NODE_ID.test(node) || !Number.isSafeInteger(seq) || (seq as number) < 0) throw refuse()
    positions.set(node, seq as number)
  }
  return positions
}

export function writeCursor (positions: ReadonlyMap<string, number>): string {
  const p = Object.create(null) as Record<string, number>
  for (const [node, seq] of [...positions].sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0)) if (seq > 0) p[node] = seq
  return Buffer.from(JSON.stringify({ v: CURSOR_VERSION, p }), 'utf8').toString('base64url')
}
