// A snapshot of one partition's entities, so that its changelog stays bounded: the states are written
// as chunk entries (each at most SNAPSHOT_CHUNK_MAX_BYTES, so a partition of any size fits the 1 MB
// message limit), then a marker naming them and the changelog sequence they cover, then the changelog is
// purged before that sequence. Chunks and marker are ordinary fenced appends: a stale owner cannot write
// them, and a snapshot cut short (a crash between chunks) leaves chunks without a marker, which a
// recovery ignores (the previous snapshot and the entries after it are still there).
//
// Consistency: X is the partition's last acknowledged sequence when the snapshot starts. Every write in
// an entry at or before X was issued to LMDB before that moment, so once LMDB committed what was issued
// the chunks hold each key at that state or a later one. A later state belongs to an entry after X,
// which a recovery replays over the snapshot anyway (entries carry whole states: replaying is idempotent).
//
// Outbox rows: chunks after the states carry the rows of this partition still in the local outbox and
// not handed to the delivery stream (the entries before X that carried them are purged), each with its
// origin when this node resends it for another; the marker names their node, its data folder id and
// its watermark.

import type { Key } from 'lmdb'
import { decodeRow } from '../src/store/record-codec.js'
import { CLUSTER_ERRORS, ClusterError } from '../src/cluster/errors.js'
import { dbOf, outboxPart, partitionRange, plain, type ChunkEntry, type KindTag, type MarkerEntry, type OutboxPart, type PartitionLog } from './entity-log-format.js'

export interface SnapshotReport {
  partition: number
  /** The changelog sequence the snapshot covers (purged before it, exclusive of it + 1). */
  coveredSeq: number
  markerSeq: number
  entities: number
  chunks: number
  bytes: number
  rows: number
  purged: number
  ms: number
}

export async function writeSnapshot (log: PartitionLog, partition: number): Promise<SnapshotReport> {
  const startedMs = performance.now()
  const covered = log.changelog.acknowledgedSeq(partition)
  if (covered === null) throw new ClusterError(CLUSTER_ERRORS.CLUSTER_NOT_CLAIMED, `partition ${partition} is not claimed by this node`, partition)
  await log.store.root.committed
  const id = `${log.node}-${covered}`
  let after: Key[] | undefined
  let chunks = 0
  let entities = 0
  let bytes = 0
  for (;;) {
    const chunk = readChunk(log, partition, after)
    if (chunk.entries.length === 0) break
    after = chunk.last
    entities += chunk.entries.length
    bytes += chunk.bytes
    const entry: ChunkEntry = { t: 'c', id, e: chunk.entries }
    // One chunk at a time: the partition's writes keep flowing between them (group commit).
    await log.changelog.append(partition, [entry])
    chunks++
  }
  const watermark = log.watermark()
  const rows = pendingRows(log, partition, watermark)
  for (let at = 0; at < rows.length;) {
    const part: OutboxPart[] = []
    let partBytes = 0
    while (at < rows.length && (part.length === 0 || partBytes < log.chunkMaxBytes)) {
      partBytes += rows[at]![1].length + 8
      part.push(rows[at++]!)
    }
    const entry: ChunkEntry = { t: 'c', id, e: [], o: part }
    await log.changelog.append(partition, [entry])
    chunks++
  }
  const marker: MarkerEntry = { t: 'm', id, x: covered, c: chunks, n: log.node, w: watermark, d: log.store.nodeId }
  const markerSeq = await log.changelog.append(partition, [marker])
  const purged = await log.changelog.purge(partition, covered + 1)
  return { partition, coveredSeq: covered, markerSeq, entities, chunks, bytes, rows: rows.length, purged, ms: performance.now() - startedMs }
}

interface Chunk {
  entries: [KindTag, string, string, Uint8Array][]
  bytes: number
  last: Key[] | undefined
}

/** The next chunk of the partition's entities after `after` (an index key), read in one synchronous go. */
function readChunk (log: PartitionLog, partition: number, after: Key[] | undefined): Chunk {
  const entries: Chunk['entries'] = []
  let bytes = 0
  let last = after
  for (const key of log.index.getKeys(partitionRange(partition, after)) as Iterable<[number, KindTag, string, string]>) {
    if (after !== undefined && sameKey(key, after)) continue
    const [, tag, account, id] = key
    last = key
    const state = dbOf(log.store, tag).get([account, id]) as unknown
    // Indexed but gone (an account deleted under it): nothing to snapshot.
    if (state === undefined) continue
    const packed = plain.pack(state)
    entries.push([tag, account, id, packed])
    bytes += packed.length + account.length + id.length + 8
    if (bytes >= log.chunkMaxBytes) break
  }
  return { entries, bytes, last }
}

function sameKey (a: readonly Key[], b: readonly Key[]): boolean {
  return a.length === b.length && a.every((part, i) => part === b[i])
}

/** This partition's outbox rows not relayed yet (above the watermark), from the local outbox. */
function pendingRows (log: PartitionLog, partition: number, watermark: number): OutboxPart[] {
  const rows: OutboxPart[] = []
  for (const { key, value } of log.store.outbox.getRange({ start: watermark + 1 }) as Iterable<{ key: number, value: unknown }>) {
    if (!(value instanceof Uint8Array)) continue
    const row = decodeRow(value)
    const id = row.visitorId ?? row.profileId
    if (id === undefined || log.partitionOfKey(row.account, id) !== partition) continue
    rows.push(outboxPart(key, Buffer.from(value), log.store.outboxOrigin(key)))
  }
  return rows
}
