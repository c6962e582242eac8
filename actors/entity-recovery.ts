// A partition taken over: claim its changelog (which fences the previous owner), read it from its
// start (the latest snapshot's chunks and marker, then the entries after it) up to the claim, and make
// the local LMDB hold exactly that for the partition's keys: whatever it held for them before (it may
// be stale, from an earlier ownership) is removed first, with the expiry, member and link index rows
// that followed from it, and the recovered states are written with theirs.
//
// Outbox rows: each entry names its node's watermark (rows of that node at or below it had reached the
// delivery stream). The rows of the snapshot (its chunks) and of the entries after it that are above their
// node's highest watermark seen may not have gone out: they are appended to this node's outbox, which
// relays them. Each keeps its first place (origin: the data folder that wrote it and its seq there):
// this node's records of it have ids of this node, but their requests carry the webhook-id made there,
// `<folder>:<seq>.<webhook>` (src/delivery/record.ts), so a row that did go out after its node's last
// watermark is sent twice under the same webhook-id.

import { CLUSTER_ERRORS, ClusterError } from '../src/cluster/errors.js'
import { decodeRow, type RowOrigin } from '../src/store/record-codec.js'
import { dbOf, originOfPart, partitionRange, plain, writeDerivedOf, type ChunkEntry, type KindTag, type LogEntry, type MarkerEntry, type PartitionLog } from './entity-log-format.js'

export interface RecoveryReport {
  partition: number
  /** The claim marker's sequence: everything acknowledged before the takeover is before it. */
  claimSeq: number
  /** The sequence the snapshot used covers (0: none). */
  snapshotSeq: number
  /** Entities in the partition after recovery. */
  entities: number
  /** Write entries applied over the snapshot. */
  entriesReplayed: number
  /** Local keys of the partition replaced or removed. */
  staleRemoved: number
  rowsResent: number
  /** Changelog messages read. */
  messages: number
  readMs: number
  ms: number
}

interface Latest { seq: number, tag: KindTag, account: string, id: string, state: Record<string, unknown> | null }
/** A row to resend: its seq in node's outbox (against node's watermark), and where it was first written (null: unknown, an earlier release's entry). */
interface Row { node: string, seq: number, bytes: Uint8Array, origin: RowOrigin | null }

export async function recoverPartition (log: PartitionLog, partition: number, withoutCollecting: (resend: () => void) => void): Promise<RecoveryReport> {
  const startedMs = performance.now()
  const claimSeq = await log.changelog.claim(partition)
  const latest = new Map<string, Latest>()
  const chunks = new Map<string, ChunkEntry[]>()
  const watermarks = new Map<string, number>()
  const entryRows: { at: number, row: Row }[] = []
  let marker: (MarkerEntry & { seq: number }) | null = null
  let messages = 0
  const seen = (node: string, watermark: number): void => {
    if (watermark > (watermarks.get(node) ?? 0)) watermarks.set(node, watermark)
  }
  let claimRead = false
  // Every message names the one it was written after (prev): one not read must be covered by the
  // snapshot the recovery starts from (compacted), else the read is missing part of the partition.
  const readSeqs = new Set<number>()
  let missingPrev = 0
  for await (const record of log.changelog.read(partition, 0, claimSeq)) {
    if (record.seq > claimSeq) break
    if (record.seq === claimSeq) claimRead = record.kind === 'claim' && record.owner === log.changelog.owner
    readSeqs.add(record.seq)
    if (typeof record.prev === 'number' && record.prev > 0 && !readSeqs.has(record.prev)) missingPrev = Math.max(missingPrev, record.prev)
    messages++
    if (record.kind !== 'entries') continue
    for (const entry of record.entries as LogEntry[]) {
      switch (entry.t) {
        case 'e':
          latest.set(slotOf(entry.k, entry.a, entry.i), { seq: record.seq, tag: entry.k, account: entry.a, id: entry.i, state: entry.s })
          // The Idempotency-Key record written with it: a retry through this node finds the first answer.
          if (entry.q !== undefined) latest.set(slotOf('q', entry.a, entry.q[0]), { seq: record.seq, tag: 'q', account: entry.a, id: entry.q[0], state: entry.q[1] as unknown as Record<string, unknown> })
          seen(entry.n, entry.w)
          for (const part of entry.o ?? []) entryRows.push({ at: record.seq, row: { node: entry.n, seq: part[0], bytes: part[1], origin: originOfPart(part, entry.d) } })
          break
        case 'c': {
          let list = chunks.get(entry.id)
          if (list === undefined) chunks.set(entry.id, list = [])
          list.push(entry)
          break
        }
        case 'm':
          marker = { ...entry, seq: record.seq }
          seen(entry.n, entry.w)
          // Chunks of other snapshots are older ones, or of one cut short: never needed again.
          for (const id of [...chunks.keys()]) if (id !== entry.id) chunks.delete(id)
          break
        case 'w':
          seen(entry.n, entry.w)
          break
      }
    }
  }
  // The read must reach this node's own claim: everything acknowledged before the takeover is before it.
  // Short of it (a stream leader answering from a lagging state), the recovery would lose those writes.
  if (!claimRead) {
    throw new ClusterError(CLUSTER_ERRORS.CLUSTER_CHANGELOG_UNAVAILABLE, `partition ${partition}: the changelog read did not reach this node's claim ${claimSeq}`, partition)
  }
  const readMs = performance.now() - startedMs
  const covered = (marker as MarkerEntry | null)?.x ?? 0
  // Seen after a NATS stream leader was killed and restarted (nats-server 2.9.10): a read that lacked
  // the partition's latest snapshot and the entries before this node's claim, yet reached the claim; the
  // recovery's own snapshot and compaction then removed the partition's acknowledged writes for good.
  if (missingPrev > covered) {
    throw new ClusterError(CLUSTER_ERRORS.CLUSTER_CHANGELOG_UNAVAILABLE, `partition ${partition}: the changelog read lacks message ${missingPrev}, which a later message follows and no snapshot covers`, partition)
  }
  const states = new Map<string, Latest>()
  if (marker !== null) {
    const own = chunks.get(marker.id) ?? []
    if (own.length !== marker.c) {
      throw new ClusterError(CLUSTER_ERRORS.CLUSTER_CHANGELOG_UNAVAILABLE, `partition ${partition}: snapshot ${marker.id} names ${marker.c} chunks, ${own.length} were read`, partition)
    }
    for (const chunk of own) {
      for (const [tag, account, id, packed] of chunk.e) {
        states.set(slotOf(tag, account, id), { seq: 0, tag, account, id, state: plain.unpack(packed) as Record<string, unknown> })
      }
    }
  }
  let entriesReplayed = 0
  for (const [slot, entry] of latest) {
    if (entry.seq <= covered) continue
    states.set(slot, entry)
    entriesReplayed++
  }
  const rows: Row[] = []
  const candidates: Row[] = []
  if (marker !== null) {
    const { n: node, d } = marker
    for (const chunk of chunks.get(marker.id) ?? []) for (const part of chunk.o ?? []) candidates.push({ node, seq: part[0], bytes: part[1], origin: originOfPart(part, d) })
  }
  for (const { at, row } of entryRows) if (at > covered) candidates.push(row)
  // A row can be both in the marker (still in its node's outbox when the snapshot was written) and in an
  // entry after it, or resent by an owner and in that owner's snapshot: its first place names it once.
  const taken = new Set<string>()
  for (const row of candidates) {
    if (row.seq <= (watermarks.get(row.node) ?? 0)) continue
    const name = row.origin === null ? `${row.node}\u0000${row.seq}` : `\u0001${row.origin.node}\u0000${row.origin.seq}`
    if (taken.has(name)) continue
    taken.add(name)
    rows.push(row)
  }

  let staleRemoved = 0
  let entities = 0
  withoutCollecting(() => {
    // Everything below is issued in this one event turn: one LMDB transaction.
    for (const key of log.index.getKeys(partitionRange(partition)) as Iterable<[number, KindTag, string, string]>) {
      const [, tag, account, id] = key
      const db = dbOf(log.store, tag)
      const stale = db.get([account, id]) as Record<string, unknown> | undefined
      if (stale !== undefined) writeDerivedOf(log.store, tag, account, id, stale, false)
      log.store.ignoreFailure(db.remove([account, id]))
      log.store.ignoreFailure(log.index.remove(key))
      staleRemoved++
    }
    for (const { tag, account, id, state } of states.values()) {
      if (state === null) continue
      log.store.ignoreFailure(dbOf(log.store, tag).put([account, id], state))
      log.store.ignoreFailure(log.index.put([partition, tag, account, id], null))
      writeDerivedOf(log.store, tag, account, id, state, true)
      if (tag !== 'q') entities++
    }
    for (const row of rows) log.store.appendOutbox(decodeRow(row.bytes), row.origin)
  })
  await log.store.root.committed
  return {
    partition, claimSeq, snapshotSeq: covered, entities, entriesReplayed, staleRemoved, rowsResent: rows.length, messages, readMs, ms: performance.now() - startedMs,
  }
}

function slotOf (tag: KindTag, account: string, id: string): string {
  return tag + '\u0000' + account + '\u0000' + id
}
