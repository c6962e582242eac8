// The per-partition changelog of cluster mode: one JetStream stream, one subject per partition
// (`<prefix>.<partition>`), replicated (R3 on a 3-server NATS cluster). A write is acknowledged only once
// the message holding it is acknowledged by JetStream, that is stored on a quorum of the stream's replicas.
//
// Fencing: every publish carries the partition's expected last subject sequence. The node that takes a
// partition over first claims it (a marker message), after which a stale owner's next append is refused
// by the server (err_code 10071, wrong last sequence) and surfaces as `Fenced`: that node must drop the
// partition at once. Nothing a stale writer sends lands after the claim (exact on nats-server 2.10+,
// the oldest cluster mode starts on: server-version.ts).
//
// Batching: one publish in flight per partition (the next one needs the previous one's sequence), so
// appends made while it flies wait and go out together as one message (group commit), each resolved
// with that message's sequence once JetStream acknowledged it. A partition with nothing in flight sends
// at the end of the event-loop turn, with the other partitions' appends of that turn (one socket write).
//
// Compaction: `snapshot()` publishes the owner's state with `Nats-Rollup: sub`, which makes JetStream
// drop every earlier message of that subject; a reader recovers the snapshot plus what followed it.
//
// A message's payload starts with one byte naming its kind: entries (msgpack values, concatenated),
// a snapshot (the owner's opaque state bytes) or a claim (the claiming node's id, UTF-8).

import { headers, nuid, type NatsConnection } from '@nats-io/transport-node'
import {
  DeliverPolicy, JetStreamApiCodes, JetStreamApiError, jetstream, jetstreamManager,
  type ApiError, type JetStreamClient, type JetStreamManager, type MsgRequest, type NextMsgRequest, type StoredMsg, type StreamConfig,
} from '@nats-io/jetstream'
import { Packr } from 'msgpackr'
import { CLUSTER_ERRORS, ClusterError, Fenced, invalidArgument, positiveInteger } from './errors.js'
import { Requests } from './requests.js'
import { isStreamNameInUse, isSubjectOverlap, retryWhileElecting } from './retry.js'

export const RECORD_KIND = { entries: 1, snapshot: 2, claim: 3 } as const

export type ChangelogRecord = (
  | { seq: number, kind: 'entries', entries: unknown[] }
  | { seq: number, kind: 'snapshot', state: Uint8Array }
  | { seq: number, kind: 'claim', owner: string }
) & {
  /**
   * As read (read()): the partition's message this one was written after (its expected last subject
   * sequence; 0 for the partition's first), or null when the message does not say. A reader can tell
   * from it that a message before this one is missing from what it read.
   */
  prev?: number | null
}

export interface ChangelogOptions {
  nc: NatsConnection
  /** The stream's name, e.g. changelogStreamName(cluster). */
  stream: string
  /** Subjects are `<subjectPrefix>.<partition>`. */
  subjectPrefix: string
  /** JetStream replicas of the stream: 1, or 3 on a 3-server cluster. */
  replicas: number
  /** This node's id, written in claim markers. */
  owner: string
  /** Most entries in one message. Default 1000. */
  batchEntriesMax?: number
  /** Most payload bytes in one message; one entry or snapshot larger than this is refused. Default 512 KiB. */
  batchSizeMaxBytes?: number
  /** How long one publish is retried (same message id, so at most once stored) before giving up. Default 10 s. */
  appendTimeoutMs?: number
  /** Told how long each acknowledged message of appends took, from its send to JetStream's acknowledgement (metrics). */
  onAppended?: (durationMs: number) => void
}

/** What the entity log uses of a changelog: every call names its partition (changelogs.ts spreads partitions over streams). */
export type PartitionChangelog = Pick<Changelog, 'owner' | 'claim' | 'holds' | 'drop' | 'append' | 'acknowledgedSeq' | 'purge' | 'read'>

export function changelogStreamName (cluster: string): string {
  return `BEACON_CHANGELOG_${cluster}`
}

interface Pending {
  kind: 'entries' | 'snapshot'
  parts: Uint8Array[]
  bytes: number
  count: number
  resolve: (seq: number) => void
  reject: (error: Error) => void
}

/** One claimed partition: its last known subject sequence and its queue of writes. */
interface Writer {
  partition: number
  subject: string
  lastSeq: number
  queue: Pending[]
  flying: boolean
}

/** JetStream's answer to a publish: the stored message's sequence, or why it was refused. */
interface PubAck {
  stream?: string
  seq?: number
  duplicate?: boolean
  error?: ApiError
}

const textDecoder = new TextDecoder()

// Plain msgpack (no records extension): every message decodes on its own, on any node, in any version.
const packr = new Packr({ useRecords: false, moreTypes: false })
const ATTEMPT_TIMEOUT_MS = 2000
const CLAIM_ATTEMPTS_MAX = 50
/** A changelog read's pulls answered "no responders" again and again: the read gives up (CLUSTER_CHANGELOG_UNAVAILABLE is the caller's to retry). */
const READ_REFUSALS_MAX = 20

export class Changelog {
  readonly stream: string
  readonly subjectPrefix: string
  readonly owner: string
  private readonly js: JetStreamClient
  private readonly jsm: JetStreamManager
  /** Appends: published to the stream's subjects, JetStream's acknowledgement as the answer. */
  private readonly requests: Requests
  private readonly batchEntriesMax: number
  private readonly batchSizeMaxBytes: number
  private readonly appendTimeoutMs: number
  private readonly onAppended: ((durationMs: number) => void) | null
  private readonly writers = new Map<number, Writer>()
  /** Writers with appends waiting for the end of this event-loop turn (flushSoon). */
  private due: Writer[] = []
  /** Message ids are `<instance>-<counter>`: unique per process run, so no restart reuses one within the duplicate window. */
  private readonly instance = nuid.next()
  private messageIds = 0
  /**
   * What this node was acknowledged, kept when a partition is dropped: the highest sequence per partition,
   * and over the whole stream. A stream leader that answers below them lacks acknowledged messages (claim).
   */
  private readonly acknowledged = new Map<number, number>()
  private acknowledgedMax = 0

  private constructor (options: ChangelogOptions, jsm: JetStreamManager) {
    this.stream = options.stream
    this.subjectPrefix = options.subjectPrefix
    this.owner = options.owner
    this.js = jetstream(options.nc, { timeout: ATTEMPT_TIMEOUT_MS })
    this.jsm = jsm
    this.requests = new Requests(options.nc)
    this.batchEntriesMax = positiveInteger('batchEntriesMax', options.batchEntriesMax ?? 1000)
    this.batchSizeMaxBytes = positiveInteger('batchSizeMaxBytes', options.batchSizeMaxBytes ?? 512 * 1024)
    this.appendTimeoutMs = positiveInteger('appendTimeoutMs', options.appendTimeoutMs ?? 10_000)
    this.onAppended = options.onAppended ?? null
  }

  /** Creates the stream if absent (or brings its settings in line), then returns the changelog. */
  static async open (options: ChangelogOptions): Promise<Changelog> {
    if (!/^[A-Za-z0-9_-]+$/.test(options.stream)) throw invalidArgument('stream', 'must be letters, digits, - or _')
    if (!/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/.test(options.subjectPrefix)) throw invalidArgument('subjectPrefix', 'must be dot-separated tokens without wildcards')
    if (options.owner === '' || /[\s.*>]/.test(options.owner)) throw invalidArgument('owner', 'must be a non-empty token')
    positiveInteger('replicas', options.replicas)
    const jsm = await retryWhileElecting(() => jetstreamManager(options.nc, { timeout: ATTEMPT_TIMEOUT_MS }))
    const changelog = new Changelog(options, jsm)
    const config = {
      name: options.stream,
      subjects: [`${options.subjectPrefix}.*`],
      num_replicas: options.replicas,
      allow_rollup_hdrs: true,
      max_msg_size: changelog.batchSizeMaxBytes + 1,
    }
    // Nodes started together open the stream at once. An update only when a setting differs (the usual
    // start changes nothing), and a refusal another node's concurrent creation or update of this very
    // stream explains is looked at again: nats-server 2.10 answers such an update "subjects overlap
    // with an existing stream" (isSubjectOverlap), a creation racing another with other settings
    // "stream name already in use". A real overlap with another stream still fails, after the retries.
    await retryWhileElecting(async () => {
      const existing = await jsm.streams.info(options.stream).catch((error: unknown) => {
        if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound) return null
        throw error
      })
      if (existing === null) await jsm.streams.add(config)
      else if (!hasSettings(existing.config, config)) await jsm.streams.update(options.stream, { ...existing.config, ...config })
    }, 30_000, error => isSubjectOverlap(error) || isStreamNameInUse(error))
    return changelog
  }

  subject (partition: number): string {
    return `${this.subjectPrefix}.${partition}`
  }

  /**
   * Takes over a partition's changelog: appends a claim marker after its current last message, so any
   * earlier writer is fenced from now on. Returns the marker's sequence: read(partition, …) up to it
   * recovers everything acknowledged before the takeover.
   */
  async claim (partition: number): Promise<number> {
    checkPartition(partition)
    this.writers.delete(partition)
    const subject = this.subject(partition)
    const payload = withKind(RECORD_KIND.claim, [Buffer.from(this.owner, 'utf8')])
    // A stale writer may slip appends in between reading the last sequence and claiming: try again from
    // the sequence the refusal reports. A stale owner still writing stops when it sees its lease expire.
    let last = await this.lastSeq(partition)
    for (let attempt = 1; ; attempt++) {
      this.checkNotBehind(partition, last, 'last message')
      try {
        const seq = await this.publish(partition, subject, payload, last, false)
        // A sequence at or below one already acknowledged to this node was handed out twice: the stream's
        // leader lost acknowledged messages. The claim stands in the stream, but nothing is recovered from it.
        this.checkNotBehind(partition, seq - 1, 'new claim')
        this.noteAcknowledged(partition, seq)
        this.writers.set(partition, { partition, subject, lastSeq: seq, queue: [], flying: false })
        return seq
      } catch (error) {
        if (!(error instanceof Fenced) || attempt === CLAIM_ATTEMPTS_MAX) throw error
        last = error.actualSeq ?? await this.lastSeq(partition)
      }
    }
  }

  /** Is this node's claim on the partition still in force (not fenced, not dropped)? */
  holds (partition: number): boolean {
    return this.writers.has(partition)
  }

  /** Forgets the claim: later appends are refused locally. Queued appends are refused with NOT_CLAIMED. */
  drop (partition: number): void {
    const writer = this.writers.get(partition)
    if (writer === undefined) return
    this.writers.delete(partition)
    failQueue(writer, new ClusterError(CLUSTER_ERRORS.CLUSTER_NOT_CLAIMED, `partition ${partition} was dropped`, partition))
  }

  /**
   * Appends entries (msgpack-encodable values) to the partition's changelog. Resolves with the sequence of
   * the message holding them once JetStream acknowledged it; rejects with Fenced if another node claimed
   * the partition (then the partition is dropped here).
   */
  append (partition: number, entries: readonly unknown[]): Promise<number> {
    const writer = this.writers.get(partition)
    if (writer === undefined) return Promise.reject(notClaimed(partition))
    const parts: Uint8Array[] = []
    let bytes = 0
    for (const entry of entries) {
      const part = packr.pack(entry)
      bytes += part.length
      parts.push(part)
    }
    if (bytes + 1 > this.batchSizeMaxBytes) {
      return Promise.reject(new ClusterError(CLUSTER_ERRORS.CLUSTER_ENTRY_TOO_LARGE, `${bytes} bytes of entries exceed batchSizeMaxBytes (${this.batchSizeMaxBytes})`, partition))
    }
    return this.enqueue(writer, 'entries', parts, bytes, entries.length)
  }

  /**
   * Replaces the partition's history by one snapshot of the owner's state (as of every append
   * acknowledged before this call, and none after it): a rollup message, fenced like an append.
   */
  snapshot (partition: number, state: Uint8Array): Promise<number> {
    const writer = this.writers.get(partition)
    if (writer === undefined) return Promise.reject(notClaimed(partition))
    if (state.length + 1 > this.batchSizeMaxBytes) {
      return Promise.reject(new ClusterError(CLUSTER_ERRORS.CLUSTER_ENTRY_TOO_LARGE, `a snapshot of ${state.length} bytes exceeds batchSizeMaxBytes (${this.batchSizeMaxBytes})`, partition))
    }
    return this.enqueue(writer, 'snapshot', [state], state.length, 1)
  }

  /**
   * The sequence of this node's last acknowledged message on the partition (its claim, an append or a
   * snapshot), or null when it holds no claim. Every write acknowledged so far is at or before it.
   */
  acknowledgedSeq (partition: number): number | null {
    return this.writers.get(partition)?.lastSeq ?? null
  }

  /**
   * Removes the partition's messages before `beforeSeq` (compaction once a snapshot covers them). Not
   * fenced: removing what a snapshot acknowledged on the subject already covers is safe whoever owns it.
   */
  async purge (partition: number, beforeSeq: number): Promise<number> {
    checkPartition(partition)
    positiveInteger('beforeSeq', beforeSeq)
    const answer = await retryWhileElecting(() => this.jsm.streams.purge(this.stream, { filter: this.subject(partition), seq: beforeSeq }), this.appendTimeoutMs)
    return answer.purged
  }

  /** The sequence of the partition's last message, 0 when it has none. Asks the stream leader. */
  async lastSeq (partition: number): Promise<number> {
    const message = await this.jsm.streams.getMessage(this.stream, { last_by_subj: this.subject(partition) })
      .catch(notFoundAsNull)
    return message?.seq ?? 0
  }

  /** How many messages the stream holds for the partition (1 right after a snapshot). */
  async messageCount (partition: number): Promise<number> {
    const subject = this.subject(partition)
    const info = await this.jsm.streams.info(this.stream, { subjects_filter: subject })
    return info.state.subjects?.[subject] ?? 0
  }

  /**
   * The partition's records after `afterSeq` (0: from its start, i.e. its latest snapshot), in order, up to
   * `throughSeq` (a sequence this node knows is there: its claim), or else its last message at the time
   * of the call. A snapshot record replaces all state before it. A read that does not reach `throughSeq`,
   * or that delivers fewer messages from the start than the stream leader counted for the partition,
   * rejects with CLUSTER_CHANGELOG_UNAVAILABLE (test/cluster/faults.test.ts, docs/internals/cluster.md); a snapshot's
   * purge running during the read does that too (it removed messages the snapshot covers): read again.
   */
  async * read (partition: number, afterSeq = 0, throughSeq: number | null = null): AsyncGenerator<ChangelogRecord> {
    checkPartition(partition)
    // What the stream leader holds of the partition now: a read from the start must deliver all of it.
    const held = afterSeq === 0 ? await this.messageCount(partition) : null
    const lastSeq = await this.lastSeq(partition)
    if (throughSeq !== null && lastSeq < throughSeq) {
      // Seen while NATS elected a new stream leader under load (nats-server 2.9.10): the leader answered
      // from a state that lacked the partition's latest messages, this node's acknowledged claim among
      // them; a recovery from it would have wiped the partition. Refused: the caller tries again.
      throw new ClusterError(CLUSTER_ERRORS.CLUSTER_CHANGELOG_UNAVAILABLE, `partition ${partition}: the stream's last message is ${lastSeq}, before ${throughSeq} which was acknowledged`, partition)
    }
    const untilSeq = throughSeq ?? lastSeq
    if (untilSeq <= afterSeq) return
    const consumer = await this.js.consumers.get(this.stream, {
      filter_subjects: this.subject(partition),
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: afterSeq + 1,
    })
    let read = 0
    let refusals = 0
    try {
      for (;;) {
        const batch = await consumer.fetch({ max_messages: 256, expires: 5000 })
        let got = 0
        try {
          for await (const message of batch) {
            got++
            read++
            if (message.seq >= untilSeq && held !== null && untilSeq === lastSeq && read < held) {
              // Seen after a NATS server was killed and restarted (nats-server 2.9.10): the consumer
              // skipped messages the leader holds, and a recovery from such a read lost acknowledged
              // writes. Refused: the caller tries again (a recovery gives its lease back).
              throw new ClusterError(CLUSTER_ERRORS.CLUSTER_CHANGELOG_UNAVAILABLE, `reading partition ${partition} delivered ${read} of its ${held} messages`, partition)
            }
            const record = decode(message.seq, message.data)
            const prev = message.headers?.get('Nats-Expected-Last-Subject-Sequence')
            record.prev = prev === undefined || prev === '' ? null : Number(prev)
            yield record
            if (message.seq >= untilSeq) return
          }
        } catch (error) {
          // A pull answered "no responders" (status 503), seen on nats-server 2.10.27 in 2 of about 10
          // runs of changelog.test and entity-log.test, probably a pull reaching the server before the
          // new consumer's interest did. nats.js makes an ordered consumer again, from the last message
          // it delivered, at the next fetch after a 503: fetch again.
          if (!isNoResponders(error) || ++refusals > READ_REFUSALS_MAX) throw error
          await new Promise(resolve => setTimeout(resolve, 100))
          continue
        }
        if (got === 0) throw new ClusterError(CLUSTER_ERRORS.CLUSTER_CHANGELOG_UNAVAILABLE, `reading partition ${partition} stalled before sequence ${untilSeq}`, partition)
      }
    } finally {
      await consumer.delete().catch(() => {})
    }
  }

  private enqueue (writer: Writer, kind: Pending['kind'], parts: Uint8Array[], bytes: number, count: number): Promise<number> {
    return new Promise<number>((resolve, reject) => {
      writer.queue.push({ kind, parts, bytes, count, resolve, reject })
      if (!writer.flying) this.flushSoon(writer)
    })
  }

  /**
   * Flushes the writer at the end of this event-loop turn, with every other writer that got appends in
   * it: their publishes then leave in one socket write (nats.js writes what was queued in one run of
   * code together), instead of one write per request, and a partition's appends of the turn in one message.
   */
  private flushSoon (writer: Writer): void {
    writer.flying = true
    this.due.push(writer)
    if (this.due.length === 1) setImmediate(this.flushDue)
  }

  private readonly flushDue = (): void => {
    const due = this.due
    this.due = []
    for (const writer of due) void this.flush(writer)
  }

  /** Sends the queue's head as one message (consecutive entries batched), then the rest, one at a time. */
  private async flush (writer: Writer): Promise<void> {
    writer.flying = true
    while (writer.queue.length > 0 && this.writers.get(writer.partition) === writer) {
      const batch = this.takeBatch(writer)
      const first = batch[0]!
      const kind = first.kind === 'snapshot' ? RECORD_KIND.snapshot : RECORD_KIND.entries
      const parts: Uint8Array[] = []
      for (const pending of batch) parts.push(...pending.parts)
      try {
        const sentAtMs = performance.now()
        const seq = await this.publish(writer.partition, writer.subject, withKind(kind, parts), writer.lastSeq, first.kind === 'snapshot')
        this.onAppended?.(performance.now() - sentAtMs)
        writer.lastSeq = seq
        this.noteAcknowledged(writer.partition, seq)
        for (const pending of batch) pending.resolve(seq)
      } catch (error) {
        // Fenced or unknown outcome: either way this node no longer knows the partition's last sequence.
        if (this.writers.get(writer.partition) === writer) this.writers.delete(writer.partition)
        const reason = error instanceof Error ? error : new Error(String(error))
        for (const pending of batch) pending.reject(reason)
        // The appends queued behind it were never sent: certainly not stored.
        failQueue(writer, new ClusterError(CLUSTER_ERRORS.CLUSTER_NOT_CLAIMED, `partition ${writer.partition}: not sent, an earlier append failed (${reason.message})`, writer.partition))
      }
    }
    writer.flying = false
  }

  private takeBatch (writer: Writer): Pending[] {
    const first = writer.queue.shift()!
    const batch = [first]
    if (first.kind === 'snapshot') return batch
    let bytes = first.bytes + 1
    let count = first.count
    for (;;) {
      const next = writer.queue[0]
      if (next === undefined || next.kind !== 'entries') break
      if (bytes + next.bytes > this.batchSizeMaxBytes || count + next.count > this.batchEntriesMax) break
      writer.queue.shift()
      batch.push(next)
      bytes += next.bytes
      count += next.count
    }
    return batch
  }

  /**
   * One fenced publish, retried with the same message id until `appendTimeoutMs`. A retry of a message that
   * was stored (its acknowledgement lost, e.g. in a leader change or while this process was paused) must
   * not be stored twice nor be taken for another writer. nats-server 2.10 on a replicated stream checks the
   * expected last subject sequence before the message id (processClusteredInboundMsg), so such a retry is
   * refused as "wrong last sequence", whatever sequence it expects: a refused retry, and a publish out of
   * time, look for the message at the one place it can be (outcomeOf). A retry that reaches the leader
   * while the first send is proposed but not yet applied is answered as a duplicate of sequence 0 (the
   * message id is staged before its sequence is known): not an answer, so it is sent again until the
   * first is applied.
   *
   * Rejects with Fenced only when the message is certainly not stored and never will be; with
   * CLUSTER_CHANGELOG_UNAVAILABLE when that is not known (it may be stored, or be later).
   */
  private async publish (partition: number, subject: string, payload: Uint8Array, expectedSeq: number, rollup: boolean): Promise<number> {
    const msgID = `${this.instance}-${++this.messageIds}`
    const h = headers()
    h.set('Nats-Msg-Id', msgID)
    h.set('Nats-Expected-Last-Subject-Sequence', String(expectedSeq))
    if (rollup) h.set('Nats-Rollup', 'sub')
    const deadline = Date.now() + this.appendTimeoutMs
    for (let attempt = 1; ; attempt++) {
      let ack: PubAck | null = null
      let failure: unknown = null
      try {
        ack = JSON.parse(textDecoder.decode((await this.requests.request(subject, payload, ATTEMPT_TIMEOUT_MS, h)).data)) as PubAck
      } catch (error) {
        // No answer (a leader election, a server lost, no responders while the stream moves): again.
        failure = error
      }
      if (ack !== null && ack.error === undefined && typeof ack.seq === 'number' && ack.seq > expectedSeq) return ack.seq
      const refused = ack?.error
      const wrongLast = refused !== undefined && (refused.err_code === JetStreamApiCodes.StreamWrongLastSequence || refused.err_code === JetStreamApiCodes.StreamWrongLastSequenceUnknown)
      // A first send refused is not stored; a retry refused, or one out of time, may have been.
      let outcome: number | typeof ABSENT | typeof UNKNOWN | null = null
      if (wrongLast && attempt === 1) outcome = ABSENT
      else if (wrongLast || Date.now() >= deadline) outcome = await this.outcomeOf(subject, expectedSeq, msgID)
      if (typeof outcome === 'number') return outcome
      if (outcome === ABSENT) {
        const actual = refused === undefined ? null : /wrong last sequence: (\d+)/.exec(refused.description)
        throw new Fenced(partition, `partition ${partition} was written by another node (${refused?.description ?? `another message follows sequence ${expectedSeq}`})`, actual == null ? null : Number(actual[1]))
      }
      if (outcome === UNKNOWN) {
        const why = refused !== undefined ? new Error(`${refused.description} (err_code ${refused.err_code})`) : failure
        throw new ClusterError(CLUSTER_ERRORS.CLUSTER_CHANGELOG_UNAVAILABLE, `partition ${partition}: JetStream did not confirm the append within ${this.appendTimeoutMs} ms, nor can it be told whether it was stored`, partition, { cause: why })
      }
      await new Promise(resolve => setTimeout(resolve, 50))
    }
  }

  private noteAcknowledged (partition: number, seq: number): void {
    if (seq > (this.acknowledged.get(partition) ?? 0)) this.acknowledged.set(partition, seq)
    if (seq > this.acknowledgedMax) this.acknowledgedMax = seq
  }

  /**
   * Refuses (CLUSTER_CHANGELOG_UNAVAILABLE) a sequence the stream's leader gave below one this node was
   * acknowledged: the partition's `last message` below its own last acknowledged one, or a `new claim`'s
   * (`seq`: its sequence less one) below any acknowledged in the stream. The leader answers from a state
   * without acknowledged messages, and a recovery from it would lose them (chaos run 4 of
   * docs/internals/cluster.md).
   */
  private checkNotBehind (partition: number, seq: number, what: 'last message' | 'new claim'): void {
    const own = this.acknowledged.get(partition) ?? 0
    const streamWide = what === 'new claim'
    if (seq >= own && (!streamWide || seq >= this.acknowledgedMax)) return
    const known = seq < own ? `${own}, which this node was acknowledged on the partition` : `${this.acknowledgedMax}, which this node was acknowledged in the stream`
    throw new ClusterError(CLUSTER_ERRORS.CLUSTER_CHANGELOG_UNAVAILABLE, `partition ${partition}: the ${streamWide ? 'new claim\'s sequence' : 'last message'} is ${streamWide ? seq + 1 : seq}, not after ${known}: the stream's leader lacks acknowledged messages`, partition)
  }

  /**
   * Whether a publish expecting `expectedSeq` was stored: fencing lets it be only the subject's first
   * message after that sequence. Its sequence when that message carries its id; ABSENT when another
   * message written right after `expectedSeq` is there (this one can never be stored now); UNKNOWN when
   * that cannot be read (no answer, or the messages after `expectedSeq` were removed by a rollup or purge)
   * or none is there yet (the publish may still be applied).
   */
  private async outcomeOf (subject: string, expectedSeq: number, msgID: string): Promise<number | typeof ABSENT | typeof UNKNOWN> {
    const query = { seq: expectedSeq + 1, next_by_subj: subject } satisfies NextMsgRequest
    const next = await retryWhileElecting(() => this.jsm.streams.getMessage(this.stream, query as unknown as MsgRequest).catch(notFoundAsNull), ATTEMPT_TIMEOUT_MS)
      .catch(() => null)
    if (next === null) return UNKNOWN
    if (next.header.get('Nats-Msg-Id') === msgID) return next.seq
    return next.header.get('Nats-Expected-Last-Subject-Sequence') === String(expectedSeq) ? ABSENT : UNKNOWN
  }
}

const ABSENT = 'absent'
const UNKNOWN = 'unknown'

/** Does the stream's configuration hold every setting of `wanted` (subjects in the same order)? */
function hasSettings (actual: StreamConfig, wanted: Pick<StreamConfig, 'subjects' | 'num_replicas' | 'allow_rollup_hdrs' | 'max_msg_size'>): boolean {
  return actual.num_replicas === wanted.num_replicas && actual.allow_rollup_hdrs === wanted.allow_rollup_hdrs &&
    actual.max_msg_size === wanted.max_msg_size && JSON.stringify(actual.subjects ?? []) === JSON.stringify(wanted.subjects)
}

function withKind (kind: number, parts: readonly Uint8Array[]): Uint8Array {
  let length = 1
  for (const part of parts) length += part.length
  const out = Buffer.allocUnsafe(length)
  out[0] = kind
  let at = 1
  for (const part of parts) {
    out.set(part, at)
    at += part.length
  }
  return out
}

export function decode (seq: number, data: Uint8Array): ChangelogRecord {
  const kind = data[0]
  const body = data.subarray(1)
  if (kind === RECORD_KIND.entries) return { seq, kind: 'entries', entries: body.length === 0 ? [] : packr.unpackMultiple(Buffer.from(body.buffer, body.byteOffset, body.length)) as unknown[] }
  if (kind === RECORD_KIND.snapshot) return { seq, kind: 'snapshot', state: body }
  if (kind === RECORD_KIND.claim) return { seq, kind: 'claim', owner: Buffer.from(body).toString('utf8') }
  throw new ClusterError(CLUSTER_ERRORS.CLUSTER_CHANGELOG_UNAVAILABLE, `changelog message ${seq} has an unknown kind ${String(kind)}`)
}

function failQueue (writer: Writer, reason: Error): void {
  const queued = writer.queue.splice(0)
  for (const pending of queued) pending.reject(reason)
}

function notClaimed (partition: number): ClusterError {
  return new ClusterError(CLUSTER_ERRORS.CLUSTER_NOT_CLAIMED, `partition ${partition} is not claimed by this node`, partition)
}

function checkPartition (partition: number): void {
  if (!Number.isSafeInteger(partition) || partition < 0) throw invalidArgument('partition', `must be a non-negative integer (got ${String(partition)})`)
}

/** A pull's 503 status (nats.js JetStreamStatusError, not exported by @nats-io/jetstream). */
function isNoResponders (error: unknown): boolean {
  return error instanceof Error && error.name === 'JetStreamStatusError' && (error as Error & { code?: unknown }).code === 503
}

/** No message on the subject: null. */
function notFoundAsNull (error: unknown): StoredMsg | null {
  if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.NoMessageFound) return null
  throw error
}
