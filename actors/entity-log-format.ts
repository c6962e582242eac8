// What the entity log writes into a partition's changelog (src/cluster/changelog.ts), and the local
// index of which keys this node's LMDB holds per partition. Part of the data format: every node of
// every release must read what any other wrote, so entries are plain msgpack maps with short keys.
//
//   write     { t: 'e', k: 'v' | 'p', a: account, i: id, s: state | null (deleted), n: node, w: watermark, o?: rows, d?: folder, q?: [scope, record] }
//   chunk     { t: 'c', id: snapshot id, e: [[k, account, id, state as plain msgpack bytes], …], o?: rows }
//   marker    { t: 'm', id, x: covered sequence, c: chunk count, n: node, w: watermark, d?: folder }
//   watermark { t: 'w', n: node, w: watermark }
//
// rows: the outbox rows issued with the write (or, in a snapshot's chunks, still in node n's outbox),
// [seq on node n, encodeRow bytes, origin?]. The watermark: every outbox row of node n with seq ≤ w had
// been handed to the delivery stream when the entry was written. A row's deliveries are sent under the
// webhook-id its first place gave them (src/delivery/record.ts, `item.messageId`), whichever node
// relays it: the node's data folder id `d` (Store.nodeId; with rows, and on markers) and the row's seq
// there, or, for a row node n resends for another node, its origin [folder id, seq]. Entries of earlier
// releases have no `d`: their rows' deliveries go out under the relaying node's ids.
//
// q: the Idempotency-Key record written with the state (src/store/idempotency.ts): recovered, indexed
// and snapshotted like an entity of kind 'q' whose id is the record's scope (store.idempotency, key
// [account, scope]), so a retry through a new owner finds it. Entries of earlier releases have none.

import { Packr } from 'msgpackr'
import type { Database, Key } from 'lmdb'
import type { Store } from '../src/store/store.js'
import type { RowOrigin } from '../src/store/record-codec.js'
import type { IdempotencyRecord } from '../src/store/idempotency.js'
import type { PartitionChangelog } from '../src/cluster/changelog.js'
import type { EntityKindName } from './entity-writes.js'

/** What a snapshot and a recovery use of the entity log (entity-log.ts implements it). */
export interface PartitionLog {
  readonly store: Store
  readonly changelog: PartitionChangelog
  /** partitionIndex(store). */
  readonly index: Database
  /** This node's id (the changelog's owner): entries and markers name it. */
  readonly node: string
  readonly chunkMaxBytes: number
  /** The highest local outbox seq handed to the delivery stream. */
  watermark (): number
  partitionOfKey (account: string, id: string): number
}

/** Visitors, profiles, and Idempotency-Key records (kept per partition like entities). */
export type KindTag = 'v' | 'p' | 'q'
/** Where a row resent for another node was first written: [data folder id, seq there]. */
export type PartOrigin = [node: string, seq: number]
export type OutboxPart = [seq: number, bytes: Uint8Array, origin?: PartOrigin]

export interface WriteEntry { t: 'e', k: 'v' | 'p', a: string, i: string, s: Record<string, unknown> | null, n: string, w: number, o?: OutboxPart[], d?: string, q?: [string, IdempotencyRecord] }
export interface ChunkEntry { t: 'c', id: string, e: [KindTag, string, string, Uint8Array][], o?: OutboxPart[] }
export interface MarkerEntry { t: 'm', id: string, x: number, c: number, n: string, w: number, d?: string }
export interface WatermarkEntry { t: 'w', n: string, w: number }
export type LogEntry = WriteEntry | ChunkEntry | MarkerEntry | WatermarkEntry

/** A row's part of an entry: its origin only when it was first written elsewhere. */
export function outboxPart (seq: number, bytes: Uint8Array, origin: RowOrigin | null): OutboxPart {
  return origin === null ? [seq, bytes] : [seq, bytes, [origin.node, origin.seq]]
}

/** Where a row of an entry was first written: its origin, or its own seq on folder `d` (null: an entry of an earlier release). */
export function originOfPart (part: OutboxPart, d: string | undefined): RowOrigin | null {
  const origin = part[2]
  if (origin !== undefined) return { node: origin[0], seq: origin[1] }
  return d === undefined ? null : { node: d, seq: part[0] }
}

/** Plain msgpack, as the changelog's own: a state packed here decodes on any node, in any release. */
export const plain = new Packr({ useRecords: false, moreTypes: false })

export function tagOf (kind: EntityKindName): 'v' | 'p' {
  return kind === 'visitor' ? 'v' : 'p'
}

export function dbOf (store: Store, tag: KindTag): Database {
  return tag === 'v' ? store.visitors : tag === 'p' ? store.profiles : store.idempotency
}

/**
 * The keys this node's LMDB holds per partition: [partition, tag, account, id] → null, written with
 * every entity write in cluster mode. What a snapshot reads and what a recovery replaces.
 */
export function partitionIndex (store: Store): Database {
  return store.root.openDB('partition-keys', {})
}

/** The index range of one partition. */
export function partitionRange (partition: number, after?: Key[]): { start: Key[], end: Key[] } {
  return { start: after ?? [partition], end: [partition + 1] }
}

interface DerivedFields { expiresAtMs?: number, indexed?: string[], profileId?: string | null, visitors?: string[] }

/** writeDerived for a key of any tag: an Idempotency-Key record's derived row is its entry in the expiry index. */
export function writeDerivedOf (store: Store, tag: KindTag, account: string, id: string, state: Record<string, unknown>, add: boolean): void {
  if (tag !== 'q') {
    writeDerived(store, tag === 'v' ? 'visitor' : 'profile', account, id, state, add)
    return
  }
  const key = [(state as unknown as IdempotencyRecord).x, account, id]
  store.ignoreFailure(add ? store.idempotencyExpiries.put(key, null) : store.idempotencyExpiries.remove(key))
}

/**
 * The rows of the derived indexes (expiries, members, links) that follow from one entity state: written
 * with a recovered state, removed with a stale one. Links are only added: the uncapped list of every
 * device ever linked is not in a profile's state (it keeps its latest 100), so none is taken away.
 */
export function writeDerived (store: Store, kind: EntityKindName, account: string, id: string, state: DerivedFields, add: boolean): void {
  if (state.expiresAtMs !== undefined && state.expiresAtMs !== 0) {
    const key = [state.expiresAtMs, account, kind, id]
    store.ignoreFailure(add ? store.expiries.put(key, null) : store.expiries.remove(key))
  }
  for (const segment of state.indexed ?? []) {
    const key = [account, segment, kind, id]
    store.ignoreFailure(add ? store.members.put(key, null) : store.members.remove(key))
  }
  if (!add) return
  if (kind === 'visitor' && typeof state.profileId === 'string') store.ignoreFailure(store.links.put([account, state.profileId, id], null))
  if (kind === 'profile') for (const visitorId of state.visitors ?? []) store.ignoreFailure(store.links.put([account, id, visitorId], null))
}
