// POST /events/batch (docs/events.md): many tracking events in one request. Each event is checked on its
// own, with the checks /campaigns/query makes (its schema, then `checkEvent` of public-routes.ts: identity,
// event type, required and custom fields) plus its timestamp's age; a refused event refuses no other. The
// accepted events go to their visitors' actors as /campaigns/query's would, but tracked (no campaign is
// matched: none is answered), and the batch is answered once every accepted event is durable, with one
// outcome per event in order.
//
// Speed: the events this node applies are all sent in one event turn, so their LMDB puts share one
// transaction and one flush (src/store/store.ts, eventTurnBatching) instead of one each.
//
// Dedupe: an event's `messageId` is claimed as an Idempotency-Key would be (actors/idempotent.ts), in
// its own namespace (MESSAGE_KEY_PREFIX) on the event's visitor: the same messageId sent again for that
// visitor within 24 hours is acknowledged (`duplicate: true`) and not applied again; with another event,
// refused 422.
//
// Placement (cluster mode): events are grouped by partition; the groups this node owns are applied here,
// each other group is sent to its owner as a batch of its own through the same forwarder single events
// take (src/cluster/forwarder.ts), whose retries reach the owner with the same forward id: an event of a
// forwarded batch without a messageId claims that id and its index as an internal key, so a retry that
// reaches a new owner (the first died after applying it) is answered from the record, not applied twice.

import { createHash } from 'node:crypto'
import { ApiError, ERRORS, type ErrorItem } from '../errors.js'
import type { Clock } from '../clock.js'
import type { ActorRuntime } from '../../actors/runtime.js'
import type { Campaign, EventBody, VisitorKind } from '../../actors/visitor.js'
import type { IdempotencyClaim } from '../../actors/idempotent.js'
import type { ForwardedReply, ForwardedRequest } from '../cluster/forwarder.js'
import { parseIsoMs } from '../matching/iso-time.js'
import { fieldsExcept } from '../fields-except.js'
import { validator } from '../validator.js'
import * as S from './schemas.js'
import type { EntityKey, Reply, Request } from './server.js'

export const BATCH_PATTERN = '/events/batch'
export const TIMESTAMP_AGE_MAX_MS = 7 * 24 * 60 * 60 * 1000
export const TIMESTAMP_AHEAD_MAX_MS = 60 * 60 * 1000
/**
 * What starts the Idempotency record key of a messageId: a control character (a client's
 * Idempotency-Key is printable ASCII), so a messageId and an Idempotency-Key never answer each other.
 */
export const MESSAGE_KEY_PREFIX = '\u0002msg:'

/** One event's outcome: 200 (durable, or a duplicate already applied) or its refusal. */
export interface EventOutcome {
  status: number
  error?: ErrorItem
  /** The messageId was applied before: acknowledged, not applied again. */
  duplicate?: true
}

/**
 * Where the events of an entity are applied (a mode's strategy): embedded mode, here; cluster mode, at
 * the owner of its partition. `groupOf` names the partition (events of one group travel together).
 */
export interface EventPlacement {
  owns (key: EntityKey): boolean
  groupOf (key: EntityKey): number
  forward (key: EntityKey, request: ForwardedRequest): Promise<ForwardedReply>
}

/** Embedded mode: one process owns everything. */
export const LOCAL_PLACEMENT: EventPlacement = {
  owns: () => true,
  groupOf: () => 0,
  forward: () => Promise.reject(new ApiError('internal', 'Embedded mode forwards nothing.')),
}

export interface EventBatchDeps {
  runtime: ActorRuntime
  visitors: VisitorKind
  clock: Clock
  placement: EventPlacement
  /** 404 unless the account exists and is active. */
  requireAccount: (account: string) => void
  /** The checks of /campaigns/query after the schema; the event to record. */
  checkEvent: (event: EventBody, request: Request) => EventBody
  outboxMark: () => number
  afterWrite: (account: string, fromSeq: number) => Promise<void> | null
  countEvent: ((account: string, kind: string, visitorId: string, campaigns: readonly { id: string }[], campaignId: unknown, nowMs: number) => void) | null
}

/** An accepted event, ready for its actor. */
interface Accepted {
  index: number
  /** As sent (ids in lower case): what a forward sends on and the fingerprint covers. */
  raw: Record<string, unknown>
  event: EventBody
  key: EntityKey
  claim: IdempotencyClaim | undefined
}

const validateBatch = validator(S.EventBatch)
const validateEvent = validator(S.BatchEvent)
const NO_CAMPAIGNS: readonly Campaign[] = []

/** The headers of a group sent to its owner: JSON, and what the events' client stamps are made of. */
function forwardHeaders (request: Request): Record<string, string> {
  const headers: Record<string, string> = { 'content-type': 'application/json' }
  if (request.forwardedFor !== '') headers['x-forwarded-for'] = request.forwardedFor
  if (request.userAgent !== '') headers['user-agent'] = request.userAgent
  return headers
}

export function eventBatch ({ runtime, visitors, clock, placement, requireAccount, checkEvent, outboxMark, afterWrite, countEvent }: EventBatchDeps): (body: unknown, request: Request) => Promise<Reply> {
  /** The event at `index`, checked, or its refusal. */
  function accept (account: string, raw: unknown, index: number, nowMs: number, request: Request): Accepted | ErrorItem {
    try {
      if (typeof raw === 'object' && raw !== null && typeof (raw as { visitorId?: unknown }).visitorId === 'string') {
        // UUIDs have one spelling (as admit() does for a single event's body).
        (raw as { visitorId: string }).visitorId = (raw as { visitorId: string }).visitorId.toLowerCase()
      }
      const element = validateEvent(raw)
      if (element.timestamp !== undefined) checkTimestamp(element.timestamp, nowMs)
      const event = checkEvent(eventOf(element, account), request)
      // Kept on the event (webhooks see it), beside its custom fields rather than among them.
      if (element.timestamp !== undefined) event.timestamp = element.timestamp
      const key = { account, id: event.visitorId }
      return { index, raw: element, event, key, claim: claimOf(element, element.messageId, request.forwardedKey, index) }
    } catch (error) {
      if (error instanceof ApiError) return error.items[0]!
      throw error
    }
  }

  /** Apply the events here (all sent in this event turn: one LMDB transaction); their outcomes, in order. */
  async function applyHere (account: string, events: readonly Accepted[]): Promise<EventOutcome[]> {
    const mark = outboxMark()
    const nowMs = clock.nowMs()
    const sent = events.map(one => runtime.send(visitors, account, one.event.visitorId, { type: 'event', event: one.event, nowMs, idem: one.claim, track: true }))
    const settled = await Promise.allSettled(sent)
    let failure: unknown = null
    const outcomes = settled.map((result, i): EventOutcome => {
      if (result.status === 'fulfilled') {
        const one = events[i]!
        if (one.claim?.replayed === true) return { status: 200, duplicate: true }
        if (countEvent !== null) countEvent(account, one.event.event, one.event.visitorId, NO_CAMPAIGNS, one.event.campaignId, nowMs)
        return { status: 200 }
      }
      if (result.reason instanceof ApiError) return refusal(result.reason)
      failure ??= result.reason
      return { status: 500 }
    })
    // Not a refusal (a bug, a failed disk): the whole batch fails (500, logged); a retry with messageIds is safe.
    if (failure !== null) throw failure
    const sync = afterWrite(account, mark)
    if (sync !== null) await sync
    return outcomes
  }

  /** Send a group of one partition to its owner as a batch of its own; each event takes the batch's outcome when it has none of its own. */
  async function applyAtOwner (account: string, events: readonly Accepted[], request: Request): Promise<EventOutcome[]> {
    const forwarded: ForwardedRequest = {
      route: `post ${BATCH_PATTERN}`,
      method: 'post',
      url: BATCH_PATTERN,
      query: '',
      params: [],
      // The origin was checked here; the owner answers this node, not a browser. It sees the client as
      // this node did (its address, X-Forwarded-For and user agent) for the events' stamps.
      headers: forwardHeaders(request),
      remoteAddress: request.remoteAddress,
      body: Buffer.from(JSON.stringify({ account, events: events.map(one => one.raw) }), 'utf8'),
    }
    let reply: ForwardedReply
    try {
      reply = await placement.forward(events[0]!.key, forwarded)
    } catch (error) {
      if (!(error instanceof ApiError)) throw error
      return events.map(() => refusal(error))
    }
    const body = parseAnswer(reply.body)
    if (reply.status === 200 && body?.results?.length === events.length) return body.results
    const error = body?.errors?.[0] ?? { code: 'internal' as const, message: `The partition's owner answered ${reply.status}.` }
    return events.map(() => ({ status: reply.status, error }))
  }

  return async function eventBatchHandler (body: unknown, request: Request): Promise<Reply> {
    const count = (body as { events?: unknown } | null)?.events
    if (Array.isArray(count) && count.length > S.BATCH_EVENTS_MAX) {
      throw new ApiError('batch_too_large', `A batch carries at most ${S.BATCH_EVENTS_MAX} events; this one has ${count.length}. Send them in several batches.`, '/events')
    }
    const batch = validateBatch(body)
    const account = batch.account
    requireAccount(account)
    const nowMs = clock.nowMs()
    const forwarded = request.forwardedKey !== ''
    const outcomes: EventOutcome[] = new Array<EventOutcome>(batch.events.length)
    const here: Accepted[] = []
    const elsewhere = new Map<number, Accepted[]>()
    for (let i = 0; i < batch.events.length; i++) {
      const one = accept(account, batch.events[i], i, nowMs, request)
      if (!('index' in one)) {
        outcomes[i] = { status: ERRORS[one.code][0], error: one }
        continue
      }
      if (placement.owns(one.key)) here.push(one)
      // A batch forwarded here is one partition's, sent to its owner: gone since, the sender retries at the new one.
      else if (forwarded) throw new ApiError('partition_moved')
      else {
        const group = placement.groupOf(one.key)
        const list = elsewhere.get(group)
        if (list === undefined) elsewhere.set(group, [one])
        else list.push(one)
      }
    }
    const remote = [...elsewhere.values()].map(async group => place(outcomes, group, await applyAtOwner(account, group, request)))
    if (here.length > 0) {
      const local = await applyHere(account, here)
      const moved: Accepted[] = []
      here.forEach((one, i) => { if (local[i]!.error?.code === 'partition_moved') moved.push(one) })
      if (moved.length > 0 && forwarded) throw new ApiError('partition_moved')
      place(outcomes, here, local)
      // This node lost a partition while writing (nothing acknowledged): those events go to the new owner.
      for (const group of groupBy(moved, placement)) remote.push(applyAtOwner(account, group, request).then(answers => place(outcomes, group, answers)))
    }
    await Promise.all(remote)
    return { status: 200, body: { status: 200, message: 'Batch processed.', errors: [], results: outcomes } }
  }
}

/** The fields of an element that are its own, not the event's. */
const ELEMENT_ONLY: ReadonlySet<string> = new Set(['messageId', 'timestamp'])

/** The element as /campaigns/query takes it: its fields but messageId and timestamp, with the batch's account. */
function eventOf (element: S.BatchEvent, account: string): EventBody {
  const event = fieldsExcept(element, ELEMENT_ONLY)
  event.account = account
  return event as unknown as EventBody
}

/** An event's claim: its messageId's, else (a batch another node forwarded here) the forward's id and its index. */
function claimOf (element: S.BatchEvent, messageId: string | undefined, forwardedKey: string, index: number): IdempotencyClaim | undefined {
  if (messageId === undefined && forwardedKey === '') return undefined
  const fingerprint = createHash('sha256').update(BATCH_PATTERN).update('\n').update(JSON.stringify(element)).digest('base64url')
  if (messageId !== undefined) return { key: MESSAGE_KEY_PREFIX + messageId, fingerprint, replayed: false }
  return { key: `${forwardedKey}#${index}`, fingerprint, forwarded: true, replayed: false }
}

function checkTimestamp (text: string, nowMs: number): void {
  const atMs = parseIsoMs(text)
  if (atMs === null) throw new ApiError('invalid_field', 'timestamp: expected an ISO 8601 instant with a time zone, like 2026-11-27T06:00:00Z.', '/timestamp')
  if (atMs < nowMs - TIMESTAMP_AGE_MAX_MS) throw new ApiError('timestamp_out_of_range', `The event's timestamp ${text} is more than 7 days old.`, '/timestamp')
  if (atMs > nowMs + TIMESTAMP_AHEAD_MAX_MS) throw new ApiError('timestamp_out_of_range', `The event's timestamp ${text} is more than 1 hour ahead of the server's clock.`, '/timestamp')
}

/** An event's refusal; a reused messageId said as such (recall() speaks of the header). */
function refusal (error: ApiError): EventOutcome {
  const item = error.items[0]!
  if (item.code === 'idempotency_key_reused') {
    return { status: error.status, error: { code: item.code, field: '/messageId', message: 'This messageId was sent with another event of this visitor within the last 24 hours: a retry sends the same event; a new event takes a new messageId.' } }
  }
  return { status: error.status, error: item }
}

/** The owner's answer (its server writes JSON), or null. */
function parseAnswer (bytes: Uint8Array | null): { results?: EventOutcome[], errors?: ErrorItem[] } | null {
  if (bytes === null) return null
  try {
    return JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8')) as { results?: EventOutcome[], errors?: ErrorItem[] }
  } catch {
    return null
  }
}

function place (outcomes: EventOutcome[], events: readonly Accepted[], answers: readonly EventOutcome[]): void {
  for (let i = 0; i < events.length; i++) outcomes[events[i]!.index] = answers[i]!
}

function groupBy (events: readonly Accepted[], placement: EventPlacement): Accepted[][] {
  const groups = new Map<number, Accepted[]>()
  for (const one of events) {
    const group = placement.groupOf(one.key)
    const list = groups.get(group)
    if (list === undefined) groups.set(group, [one])
    else list.push(one)
  }
  return [...groups.values()]
}
