// The retained event log of cluster mode (docs/event-log.md, "Cluster mode"): one JetStream stream per
// cluster, `BEACON_EVENTS_<cluster>`, replicated like the changelog (BEACON_REPLICAS), holding every
// event a visitor actor accepted, on any node. Retention is the stream's: MaxAge from
// BEACON_EVENT_RETENTION_DAYS, MaxBytes from BEACON_EVENT_LOG_MAX_BYTES (oldest dropped first).
//
// Subjects: `beacon.events.<cluster>.<account>.<visitor>.<profile>`, the profile the base64url of its
// id (ids may hold dots) or `_` for none. Downstream consumers subscribe to an account's events with
// `beacon.events.<cluster>.<account>.>`; erasing a visitor is one subject purge (`….<visitor>.*`), a
// person one more (`….*.<profile>`), no walk of the log. Payloads are JSON, the fields of a page's events.
//
// Durability: the append publishes at once (the visitor's changelog append leaves at the end of the
// event turn: the two fly together) and the actor's reply waits for both acknowledgements. Message id
// (Nats-Msg-Id): the request's Idempotency-Key (the client's, or the one a forwarding node gave it)
// scoped to the visitor, so a retry applied again after a failure is stored once within the stream's
// duplicate window; else an id of this process, so this module's own resends are stored once.
//
// Reads: JetStream delivers forward only, so a page (newest first) reads windows of sequences going
// back from its cursor, each through an ephemeral consumer filtered to the account (and visitor or
// profile); an export reads forward. An event's `id` is `<timeMs>-<stream sequence>`: the page's cursor.

import { headers, nanos, nuid, type MsgHdrs, type NatsConnection } from '@nats-io/transport-node'
import {
  AckPolicy, DeliverPolicy, JetStreamApiCodes, JetStreamApiError, jetstream, jetstreamManager,
  type JetStreamClient, type JetStreamManager, type StreamConfig,
} from '@nats-io/jetstream'
import { ApiError } from '../errors.js'
import { log } from '../log.js'
import { EVENT_SCAN_MAX, eventColumns, parseCursor, type EventQuery, type EventStore, type LoggedEvent } from '../store/event-log.js'
import { Requests } from './requests.js'
import { isStreamNameInUse, isStreamNotFound, isSubjectOverlap, retryWhileElecting } from './retry.js'

export interface EventStreamOptions {
  nc: NatsConnection
  cluster: string
  /** JetStream replicas (BEACON_REPLICAS), as the changelog's. */
  replicas: number
  /** BEACON_EVENT_RETENTION_DAYS in ms: the stream's MaxAge. */
  retentionMs: number
  /** BEACON_EVENT_LOG_MAX_BYTES (0: no cap): the stream's MaxBytes. */
  sizeMaxBytes: number
  /** How long one append is retried (same message id) before the request fails 503. Default 10 s. */
  appendTimeoutMs?: number
}

export function eventStreamName (cluster: string): string {
  return `BEACON_EVENTS_${cluster}`
}

export function eventSubjectPrefix (cluster: string): string {
  return `beacon.events.${cluster}`
}

/** A profile id as its subject token: base64url of its UTF-8 (ids may hold dots, spaces); `_` for none. */
export function profileToken (profileId: string | null): string {
  return profileId === null ? '_' : Buffer.from(profileId, 'utf8').toString('base64url')
}

/** How long JetStream remembers a message id (retries within it are stored once). */
export const EVENT_DUPLICATE_WINDOW_MS = 120_000
/** Batch imports' events may be dated up to an hour ahead of their acceptance: reads bound by it. */
const AHEAD_MAX_MS = 3_600_000
const ATTEMPT_TIMEOUT_MS = 2000
/** A page's first window of sequences; each further one twice as long, up to WINDOW_MAX. */
const WINDOW_FIRST = 1024
const WINDOW_MAX = 32_768
/** Windows one page reads at most before it answers with a `next` (a quiet account in a busy stream). */
const WINDOWS_PER_PAGE_MAX = 64
const FETCH_MAX = 256

/** An event as `follow` hands it over. */
export interface FollowedEvent {
  account: string
  timeMs: number
  visitorId: string
  profileId: string | null
  kind: string
  fields: Record<string, unknown>
  segments: string[] | undefined
}

/** A message's JSON: the event as a page shows it, but its id (made from the stream's sequence). */
type StoredPayload = Omit<LoggedEvent, 'id'>

interface Read { seq: number, timeMs: number, stored: StoredPayload }

interface PubAck { seq?: number, error?: { description: string } }

const textDecoder = new TextDecoder()
const textEncoder = new TextEncoder()

export class EventStream implements EventStore {
  readonly stream: string
  readonly prefix: string
  private readonly js: JetStreamClient
  private readonly jsm: JetStreamManager
  private readonly requests: Requests
  private readonly appendTimeoutMs: number
  private readonly instance = nuid.next()
  private messageIds = 0

  private constructor (options: EventStreamOptions, jsm: JetStreamManager) {
    this.stream = eventStreamName(options.cluster)
    this.prefix = eventSubjectPrefix(options.cluster)
    this.js = jetstream(options.nc, { timeout: ATTEMPT_TIMEOUT_MS })
    this.jsm = jsm
    this.requests = new Requests(options.nc)
    this.appendTimeoutMs = options.appendTimeoutMs ?? 10_000
  }

  /** Creates the stream if absent, or brings its settings in line (retention, cap, replicas): every node at start. */
  static async open (options: EventStreamOptions): Promise<EventStream> {
    const jsm = await retryWhileElecting(() => jetstreamManager(options.nc, { timeout: ATTEMPT_TIMEOUT_MS }))
    const events = new EventStream(options, jsm)
    const config = {
      name: events.stream,
      subjects: [`${events.prefix}.>`],
      num_replicas: options.replicas,
      max_age: nanos(options.retentionMs),
      max_bytes: options.sizeMaxBytes > 0 ? options.sizeMaxBytes : -1,
      duplicate_window: nanos(EVENT_DUPLICATE_WINDOW_MS),
    }
    // As the changelog's open (changelog.ts): nodes started together race; an update only when a setting differs.
    await retryWhileElecting(async () => {
      const existing = await jsm.streams.info(events.stream).catch((error: unknown) => {
        if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound) return null
        throw error
      })
      if (existing === null) await jsm.streams.add(config)
      else if (!hasSettings(existing.config, config)) await jsm.streams.update(events.stream, { ...existing.config, ...config })
    }, 30_000, error => isSubjectOverlap(error) || isStreamNameInUse(error))
    return events
  }

  /** The subject of a visitor's events (as linked to `profileId` then). */
  subject (account: string, visitorId: string, profileId: string | null): string {
    return `${this.prefix}.${account}.${visitorId}.${profileToken(profileId)}`
  }

  /** Publishes the event; resolves once the stream's quorum stored it (the actor's reply waits for it). */
  append (account: string, visitorId: string, profileId: string | null, event: Record<string, unknown>, nowMs: number, segments: readonly string[], dedupeKey: string | null = null): Promise<void> {
    const { kind, fields } = eventColumns(event)
    const payload: StoredPayload = { time: new Date(nowMs).toISOString(), visitorId, kind, fields }
    if (profileId !== null) payload.profileId = profileId
    if (segments.length > 0) payload.segments = segments.slice()
    const h = headers()
    h.set('Nats-Msg-Id', dedupeKey === null ? `${this.instance}-${++this.messageIds}` : `${account}.${visitorId}.${dedupeKey}`)
    return this.publish(this.subject(account, visitorId, profileId), textEncoder.encode(JSON.stringify(payload)), h)
  }

  private async publish (subject: string, data: Uint8Array, h: MsgHdrs): Promise<void> {
    const deadline = Date.now() + this.appendTimeoutMs
    for (;;) {
      let refused: string | null = null
      try {
        const ack = JSON.parse(textDecoder.decode((await this.requests.request(subject, data, ATTEMPT_TIMEOUT_MS, h)).data)) as PubAck
        // A duplicate (a retry of a stored message) is acknowledged as stored: what the caller needs.
        if (ack.error === undefined && typeof ack.seq === 'number') return
        refused = ack.error?.description ?? 'no sequence in the acknowledgement'
      } catch {
        // No answer (an election, a server lost): again, the same message id.
      }
      if (Date.now() >= deadline) {
        // The event may be stored, and its visitor's write with it: an unknown outcome, never applied again elsewhere.
        throw new ApiError('write_unconfirmed', `The event log (JetStream stream ${this.stream}) did not confirm the event within ${this.appendTimeoutMs} ms${refused === null ? '' : ` (${refused})`}: it may have been applied. Retry with the same Idempotency-Key.`, undefined, { 'Retry-After': '1' })
      }
      await new Promise(resolve => setTimeout(resolve, 50))
    }
  }

  /** One page, newest first, as EventLog.page (cursor: a `next`, its sequence part). */
  page (account: string, query: EventQuery, limit: number, cursor: string | null): Promise<{ events: LoggedEvent[], next: string | null }> {
    return this.page0(account, query, limit, cursor).catch(unavailable)
  }

  private async page0 (account: string, query: EventQuery, limit: number, cursor: string | null): Promise<{ events: LoggedEvent[], next: string | null }> {
    const info = await this.retry(() => this.jsm.streams.info(this.stream))
    const first = Math.max(1, info.state.first_seq)
    const after = cursor === null ? null : parseCursor(cursor)
    let hi = after === null ? info.state.last_seq + 1 : Math.min(after[1], info.state.last_seq + 1)
    const filter = this.filter(account, query)
    const oldestMs = query.fromMs - AHEAD_MAX_MS
    const events: LoggedEvent[] = []
    let scanned = 0
    let span = WINDOW_FIRST
    for (let windows = 0; hi > first; windows++) {
      if (windows >= WINDOWS_PER_PAGE_MAX || scanned >= EVENT_SCAN_MAX) return { events, next: `0-${hi}` }
      const lo = Math.max(first, hi - span)
      const read = await this.window(filter, lo, hi)
      scanned += read.length
      for (let at = read.length - 1; at >= 0; at--) {
        const one = read[at]!
        if (one.timeMs < oldestMs) return { events, next: null }
        if (!matches(one, query)) continue
        events.push(view(one))
        if (events.length >= limit) return { events, next: `${Date.parse(one.stored.time)}-${one.seq}` }
      }
      hi = lo
      span = Math.min(span * 2, WINDOW_MAX)
    }
    return { events, next: null }
  }

  /** The account's events matching the query, oldest first (in the order they were accepted), in steps: what an export streams. */
  async * range (account: string, query: EventQuery): AsyncGenerator<LoggedEvent[]> {
    const info = await this.retry(() => this.jsm.streams.info(this.stream)).catch(unavailable)
    const end = info.state.last_seq + 1
    const filter = this.filter(account, query)
    let lo = Math.max(1, info.state.first_seq)
    while (lo < end) {
      const hi = Math.min(end, lo + WINDOW_MAX)
      const batch: LoggedEvent[] = []
      for (const one of await this.window(filter, lo, hi).catch(unavailable)) if (matches(one, query)) batch.push(view(one))
      if (batch.length > 0) yield batch
      lo = hi
    }
  }

  /**
   * A replay's next step (src/jobs/replay.ts), as EventLog.next but in the order the stream accepted the
   * events: at most `limit` of the account's events of [fromMs, toMs) matching the query, after the event
   * `after` ([timeMs, stream sequence]; null: from the first message stored an hour before fromMs, as an
   * event may be dated up to an hour ahead of its acceptance), reading at most WINDOW_FIRST of the
   * account's messages. `last`: where the next step resumes; null once the stream's end (or an hour past
   * toMs) is reached.
   */
  next (account: string, query: EventQuery, after: [number, number] | null, limit: number): Promise<{ events: LoggedEvent[], last: [number, number] | null }> {
    return this.next0(account, query, after, limit).catch(unavailable)
  }

  private async next0 (account: string, query: EventQuery, after: [number, number] | null, limit: number): Promise<{ events: LoggedEvent[], last: [number, number] | null }> {
    const info = await this.retry(() => this.jsm.streams.info(this.stream))
    const end = info.state.last_seq + 1
    const lo = after === null ? { timeMs: query.fromMs - AHEAD_MAX_MS } : Math.max(after[1] + 1, info.state.first_seq)
    const events: LoggedEvent[] = []
    if (typeof lo === 'number' && lo >= end) return { events, last: null }
    const read = await this.window(this.filter(account, query), lo, end, WINDOW_FIRST)
    for (const one of read) {
      if (one.timeMs >= query.toMs + AHEAD_MAX_MS) return { events, last: null }
      if (!matches(one, query)) continue
      events.push(view(one))
      if (events.length >= limit) return { events, last: [Date.parse(one.stored.time), one.seq] }
    }
    return { events, last: read.length < WINDOW_FIRST ? null : [0, read[read.length - 1]!.seq] }
  }

  /**
   * Every event the stream holds, oldest first, then each new one as it is stored, through an ordered
   * consumer (nats.js makes it again from the last message delivered after a loss): what every node's
   * saved-report columns are fed from (src/reports/saved-stream-feed.ts). `onCaughtUp` is called once,
   * when what the stream held at the call is delivered. Answers what stops it.
   */
  async follow (onEvent: (event: FollowedEvent) => void, onCaughtUp: () => void): Promise<() => void> {
    const info = await this.retry(() => this.jsm.streams.info(this.stream)).catch(unavailable)
    const upTo = info.state.last_seq
    let caughtUp = false
    const reached = (): void => {
      if (caughtUp) return
      caughtUp = true
      onCaughtUp()
    }
    if (info.state.messages === 0) reached()
    const consumer = await this.js.consumers.get(this.stream, { filter_subjects: `${this.prefix}.>`, deliver_policy: DeliverPolicy.All })
    const from = this.prefix.length + 1
    const messages = await consumer.consume({
      callback: message => {
        let stored: StoredPayload
        try {
          stored = decodePayload(message.data)
        } catch (error) {
          // Not Beacon's (the subjects are open to whoever may publish there): skipped.
          log.warn({ err: error, seq: message.seq }, 'event stream message not decodable; skipped')
          return
        }
        const account = message.subject.slice(from, message.subject.indexOf('.', from))
        onEvent({ account, timeMs: Date.parse(stored.time), visitorId: stored.visitorId, profileId: stored.profileId ?? null, kind: stored.kind, fields: stored.fields, segments: stored.segments })
        if (message.seq >= upTo || message.info.pending === 0) reached()
      },
    })
    return () => { void messages.close().catch(() => {}) }
  }

  /** When the stream's oldest message was stored (what MaxAge and MaxBytes left), or null when it holds none. */
  async firstTimeMs (): Promise<number | null> {
    const info = await this.retry(() => this.jsm.streams.info(this.stream)).catch(unavailable)
    return info.state.messages === 0 ? null : Date.parse(info.state.first_ts)
  }

  /** Removes the account's events of these visitors or profiles (erasure): one subject purge each. Returns how many. */
  async forget (account: string, visitors: ReadonlySet<string>, profiles: ReadonlySet<string>): Promise<number> {
    let removed = 0
    for (const visitorId of visitors) removed += await this.purge(`${this.prefix}.${account}.${visitorId}.*`)
    for (const profileId of profiles) removed += await this.purge(`${this.prefix}.${account}.*.${profileToken(profileId)}`)
    return removed
  }

  /** Removes every event of an account (its deletion). */
  removeAccount (account: string): Promise<number> {
    return this.purge(`${this.prefix}.${account}.>`)
  }

  close (): void {
    this.requests.close()
  }

  private async purge (filter: string): Promise<number> {
    const answer = await this.retry(() => this.jsm.streams.purge(this.stream, { filter })).catch(unavailable)
    return answer.purged
  }

  /**
   * A call on the stream, retried while NATS elects, and on "stream not found": the stream exists (opened),
   * but a server that has not applied its creation yet may answer so (retry.ts, isStreamNotFound).
   */
  private retry<T> (operation: () => Promise<T>): Promise<T> {
    return retryWhileElecting(operation, this.appendTimeoutMs, isStreamNotFound)
  }

  private filter (account: string, query: EventQuery): string {
    const visitor = query.visitorId ?? '*'
    const profile = query.profileId === null ? '*' : profileToken(query.profileId)
    return visitor === '*' && profile === '*' ? `${this.prefix}.${account}.>` : `${this.prefix}.${account}.${visitor}.${profile}`
  }

  /**
   * The messages of `filter` with sequences in [lo, hi), in order, through an ephemeral consumer; at most
   * `max` of them. `lo` a time ({ timeMs }): from the first message the stream stored at or after it.
   */
  private async window (filter: string, lo: number | { timeMs: number }, hi: number, max = Infinity): Promise<Read[]> {
    const start = typeof lo === 'number'
      ? { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: lo }
      : { deliver_policy: DeliverPolicy.StartTime, opt_start_time: new Date(Math.max(0, lo.timeMs)).toISOString() }
    const consumer = await this.retry(() => this.jsm.consumers.add(this.stream, {
      filter_subject: filter, ...start,
      ack_policy: AckPolicy.None, mem_storage: true, num_replicas: 1, inactive_threshold: nanos(30_000),
    }))
    const out: Read[] = []
    try {
      let pending = consumer.num_pending
      if (pending === 0) return out
      const pull = await this.js.consumers.get(this.stream, consumer.name)
      while (pending > 0) {
        const batch = await pull.fetch({ max_messages: Math.min(FETCH_MAX, pending), expires: 5000 })
        let got = 0
        for await (const message of batch) {
          got++
          pending = message.info.pending
          if (message.seq >= hi) return out
          out.push({ seq: message.seq, timeMs: message.info.timestampNanos / 1e6, stored: decodePayload(message.data) })
          if (out.length >= max) return out
        }
        if (got === 0) throw new ApiError('unavailable', `The event log (JetStream stream ${this.stream}) did not deliver its messages; retry.`)
      }
      return out
    } finally {
      await this.jsm.consumers.delete(this.stream, consumer.name).catch(() => {})
    }
  }
}

/** A failure to read or purge the stream, after its retries: 503 (an ApiError passes as it is). */
function unavailable (error: unknown): never {
  if (error instanceof ApiError) throw error
  throw new ApiError('unavailable', `The event log (JetStream) cannot be read or changed right now (${error instanceof Error ? error.message : String(error)}); retry.`)
}

/** A message's payload (JSON: the event as a page shows it, but its id). */
function decodePayload (data: Uint8Array): StoredPayload {
  return JSON.parse(textDecoder.decode(data)) as StoredPayload
}

function matches (one: Read, query: EventQuery): boolean {
  const timeMs = Date.parse(one.stored.time)
  return timeMs >= query.fromMs && timeMs < query.toMs && (query.kind === null || one.stored.kind === query.kind)
}

function view ({ seq, stored }: Read): LoggedEvent {
  const event: LoggedEvent = { id: `${Date.parse(stored.time)}-${seq}`, time: stored.time, visitorId: stored.visitorId, kind: stored.kind, fields: stored.fields }
  if (stored.profileId !== undefined) event.profileId = stored.profileId
  if (stored.segments !== undefined) event.segments = stored.segments
  return event
}

function hasSettings (actual: StreamConfig, wanted: Pick<StreamConfig, 'subjects' | 'num_replicas' | 'max_age' | 'max_bytes' | 'duplicate_window'>): boolean {
  return actual.num_replicas === wanted.num_replicas && actual.max_age === wanted.max_age && actual.max_bytes === wanted.max_bytes &&
    actual.duplicate_window === wanted.duplicate_window && JSON.stringify(actual.subjects ?? []) === JSON.stringify(wanted.subjects)
}
