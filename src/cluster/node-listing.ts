// A listing read from every live node of a cluster as if it were one (issue 17, "Admin listings from
// any node"): what lives in each node's own LMDB (delivery records, audit entries) is asked of every
// live node in parallel (calls to a named node: src/cluster/node-calls.ts), and their pages are merged
// in the listing's order. The callers say what is asked and in which order (src/delivery/cluster-history.ts,
// src/audit/cluster-audit.ts); this file holds what they share: the calls' shape, the fan-out, the merge
// and the opaque cursor.
//
// Merge: each node answers its own page from its position (its items in its own order, at most `limit`)
// and says whether it has more; the heads are taken in the listing's order (ties decided by the caller's
// order: node id, then seq) until `limit` items, or until a node that has more than it sent ran out (one
// of its unsent items may come before every other head). The cursor holds every node's position (the seq
// of the last item of it taken), so following `next` lists each item of the cluster exactly once,
// whatever the merge order. It is opaque to clients: `base64url` of JSON `{"v":1,"p":{"<node id>":<seq>,…}}`;
// a node absent from it starts from its first item. A node that does not answer makes the whole listing
// a 503 (never a partial page): NodeCalls' `call` rejects, and so does the fan-out.

import { ApiError } from '../errors.js'

/** Calls to named nodes (src/cluster/node-calls.ts implements it). */
export interface PeerCalls {
  /** The live nodes' ids, this node among them. */
  nodes: () => string[]
  /** Rejects with the node's ApiError, or 503 unavailable when it did not answer in time. */
  call: (node: string, method: string, payload: unknown) => Promise<unknown>
  serve: (method: string, handler: (payload: unknown) => Promise<unknown>) => void
}

/** A listing's cursor (every node's position) is at most this long; about 100 nodes fit. */
export const CLUSTER_CURSOR_LENGTH_MAX = 4096
/**
 * A node's page of a cluster-wide listing (or its share of a report) stays under this many bytes, so it
 * travels as one NATS message (max_payload is 1 MiB by default); the rest comes with the next page.
 */
export const CLUSTER_PAGE_SIZE_MAX_BYTES = 256 * 1024

const CURSOR_VERSION = 1
const NODE_ID = /^[A-Za-z0-9_-]{1,64}$/

/** Every live node's answer to `method` (its payload made by `payloadFor`), asked in parallel; rejects as soon as one node fails. */
export async function askEveryNode<T> (calls: PeerCalls, method: string, payloadFor: (node: string) => unknown): Promise<Array<{ node: string, answer: T }>> {
  return Promise.all(calls.nodes().map(async node => ({ node, answer: await calls.call(node, method, payloadFor(node)) as T })))
}

/** A node's page: its items in its own order, and whether it has more after them. */
export interface NodePage<T> { items: readonly T[], more: boolean }

export interface ListingOptions<T> {
  calls: PeerCalls
  /** The previous page's `next`, '' for the first page; anything else is 400 invalid_field at `/<field>`. */
  cursor: string
  field: string
  limit: number
  /** Node `node`'s page from `position` (0: from its first item). */
  page: (node: string, position: number) => Promise<NodePage<T>>
  /** Whether `a` (of node `aNode`) comes before `b` (of `bNode`) in the listing. */
  before: (a: T, aNode: string, b: T, bNode: string) => boolean
  /** An item's position in its node's order (its seq: > 0). */
  positionOf: (item: T) => number
}

/** A page of the cluster's listing: items of every node tagged with it, `next` null once every node's items were listed. */
export async function listAcrossNodes<T> (options: ListingOptions<T>): Promise<{ items: Array<{ node: string, item: T }>, next: string | null }> {
  const { calls, limit, before, positionOf } = options
  const positions = readCursor(options.cursor, options.field)
  const pages = await Promise.all(calls.nodes().map(async node => ({ node, page: await options.page(node, positions.get(node) ?? 0), taken: 0 })))
  const items: Array<{ node: string, item: T }> = []
  while (items.length < limit) {
    if (pages.some(({ page, taken }) => taken === page.items.length && page.more)) break
    let first: typeof pages[number] | null = null
    for (const entry of pages) {
      if (entry.taken === entry.page.items.length) continue
      if (first === null || before(entry.page.items[entry.taken]!, entry.node, first.page.items[first.taken]!, first.node)) first = entry
    }
    if (first === null) break
    const item = first.page.items[first.taken++]!
    positions.set(first.node, positionOf(item))
    items.push({ node: first.node, item })
  }
  const done = pages.every(({ page, taken }) => taken === page.items.length && !page.more)
  return { items, next: done ? null : writeCursor(positions) }
}

/**
 * The first items of a node's page that stay under CLUSTER_PAGE_SIZE_MAX_BYTES by `bytesOf` (at least
 * one): the rest is left for the next page.
 */
export function sizedItems<T> (items: readonly T[], bytesOf: (item: T) => number): readonly T[] {
  let bytes = 0
  for (const [i, item] of items.entries()) {
    bytes += bytesOf(item)
    if (bytes > CLUSTER_PAGE_SIZE_MAX_BYTES && i > 0) return items.slice(0, i)
  }
  return items
}

/**
 * The positions a cursor holds: none for '' (and '0', the embedded mode's first page of the deliveries
 * log, so a client written for it starts the same way); 400 invalid_field for anything writeCursor did
 * not make.
 */
export function readCursor (cursor: string, field: string): Map<string, number> {
  const positions = new Map<string, number>()
  if (cursor === '' || cursor === '0') return positions
  const refuse = (): ApiError => new ApiError('invalid_field', `${field} must be the next of a previous page of this listing (in cluster mode an opaque string), or omitted for the first page.`, `/${field}`)
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
