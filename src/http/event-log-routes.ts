// The retained event log over the admin API (docs/event-log.md): a page of an account's events, newest
// first, and the same range as an NDJSON stream for an export. Served from this node's log (embedded
// mode) or the cluster's stream (cluster mode, through any node); without one
// (BEACON_EVENT_RETENTION_DAYS=0) both answer 501 event_log_not_kept.

import Type from 'typebox'
import { ApiError } from '../errors.js'
import type { Catalogs } from '../catalog/catalogs.js'
import { EVENT_PAGE_DEFAULT, EVENT_PAGE_MAX, parseCursor, type EventQuery, type EventStore, type LoggedEvent } from '../store/event-log.js'
import { visitorKey } from '../../actors/visitor.js'
import { NAME_PATTERN, UUID_PATTERN } from '../patterns.js'
import { LIMITS } from './schemas.js'
import { accountParam } from './access.js'
import { json, type QueryParameter, type RouteDefinition } from './route.js'
import * as R from './reply-schemas.js'

const NAME = new RegExp(NAME_PATTERN)
const UUID = new RegExp(UUID_PATTERN)
const NDJSON = 'application/x-ndjson'

const RANGE_QUERY: QueryParameter[] = [
  { name: 'from', description: 'ISO-8601 time, inclusive (default: the oldest kept).', schema: Type.String({ format: 'date-time' }) },
  { name: 'to', description: 'ISO-8601 time, exclusive (default: now and after).', schema: Type.String({ format: 'date-time' }) },
  { name: 'visitorId', description: 'Only this visitor\'s events.', schema: Type.String() },
  { name: 'profileId', description: 'Only events of visitors linked to this profile when they were applied.', schema: Type.String() },
  { name: 'kind', description: 'Only this event type.', schema: Type.String() },
]

export interface EventLogRoutesDeps {
  catalogs: Catalogs
  /** This node's log, or the cluster's; null: none kept (retention 0): 501. */
  events: EventStore | null
}

export function eventLogRoutes ({ catalogs, events }: EventLogRoutesDeps): RouteDefinition[] {
  const kept = (): EventStore => {
    if (events === null) throw new ApiError('event_log_not_kept')
    return events
  }
  return [{
    method: 'get', pattern: '/admin/accounts/:account/events', body: false, role: 'viewer',
    doc: {
      summary: 'The retained event log, newest first',
      description: 'A page of the account\'s accepted events (live and batch) in [from, to), newest first, filtered by visitor, profile or kind. A page reads at most 20000 events: a rare filter may answer fewer than `limit` events with a `next`; follow `next` until it is null. Cluster mode: the cluster\'s log through any node, in the order events were accepted (docs/event-log.md). 501 `event_log_not_kept` when BEACON_EVENT_RETENTION_DAYS=0.',
      tag: 'Event log',
      query: [
        ...RANGE_QUERY,
        { name: 'limit', description: `Page size (default ${EVENT_PAGE_DEFAULT}, at most ${EVENT_PAGE_MAX}).`, schema: Type.Integer({ minimum: 1, maximum: EVENT_PAGE_MAX }) },
        { name: 'cursor', description: 'The `next` of the previous page.', schema: Type.String() },
      ],
      ok: json(200, 'A page of events.', R.EventLogPage), errors: ['account_not_found', 'invalid_field', 'event_log_not_kept'],
    },
    async handler (request) {
      const account = accountParam(request, catalogs)
      const log = kept()
      const params = new URLSearchParams(request.query)
      const query = eventQuery(params)
      const limit = wholeNumber(params.get('limit'), 1, EVENT_PAGE_MAX, 'limit', EVENT_PAGE_DEFAULT)
      const cursor = params.get('cursor')
      if (cursor !== null && parseCursor(cursor) === null) throw new ApiError('invalid_field', 'cursor must be the `next` of a previous page (<timeMs>-<seq>).', '/cursor')
      return { status: 200, body: await log.page(account, query, limit, cursor) }
    },
  }, {
    method: 'get', pattern: '/admin/accounts/:account/events/export', body: false, role: 'owner',
    doc: {
      summary: 'Export the event log as NDJSON',
      description: 'The account\'s events in [from, to) matching the filters, oldest first, one JSON object a line (the fields of a page\'s events), streamed as they are read. What `beacon export-events` saves. Cluster mode: the cluster\'s log through any node, in the order events were accepted. 501 `event_log_not_kept` when BEACON_EVENT_RETENTION_DAYS=0.',
      tag: 'Event log',
      query: RANGE_QUERY,
      ok: { status: 200, description: 'One event a line.', schema: Type.String(), contentType: NDJSON },
      errors: ['account_not_found', 'invalid_field', 'event_log_not_kept'],
    },
    handler (request) {
      const account = accountParam(request, catalogs)
      const log = kept()
      const query = eventQuery(new URLSearchParams(request.query))
      return { status: 200, contentType: NDJSON, body: null, stream: ndjson(log.range(account, query)) }
    },
  }]
}

/** Events per chunk written (a few hundred kB): what the server holds beyond the socket's buffer. */
const EXPORT_CHUNK_EVENTS = 1000

/** The lines of an export, in chunks of EXPORT_CHUNK_EVENTS (each step of the walk is one read transaction). */
async function * ndjson (steps: Iterable<LoggedEvent[]> | AsyncIterable<LoggedEvent[]>): AsyncGenerator<string> {
  for await (const batch of steps) {
    for (let at = 0; at < batch.length; at += EXPORT_CHUNK_EVENTS) {
      let chunk = ''
      for (const event of batch.slice(at, at + EXPORT_CHUNK_EVENTS)) chunk += JSON.stringify(event) + '\n'
      yield chunk
    }
  }
}

/** from, to, visitorId, profileId, kind: each checked, a bad one 400 naming it. */
function eventQuery (params: URLSearchParams): EventQuery {
  const fromMs = time(params.get('from'), 'from', 0)
  const toMs = time(params.get('to'), 'to', Number.MAX_SAFE_INTEGER)
  if (fromMs > toMs) throw new ApiError('invalid_field', 'from must not be after to.', '/from')
  const visitorId = params.get('visitorId')
  if (visitorId !== null && !UUID.test(visitorId)) throw new ApiError('invalid_field', 'visitorId must be a visitor id (a UUID).', '/visitorId')
  const profileId = params.get('profileId')
  if (profileId !== null && (profileId.length === 0 || profileId.length > LIMITS.idLengthMax)) throw new ApiError('invalid_field', `profileId must be 1 to ${LIMITS.idLengthMax} characters.`, '/profileId')
  const kind = params.get('kind')
  if (kind !== null && !NAME.test(kind)) throw new ApiError('invalid_field', 'kind must be an event type name: 1 to 128 characters of A-Z a-z 0-9 _ . : -', '/kind')
  return { fromMs, toMs, visitorId: visitorId === null ? null : visitorKey(visitorId), profileId, kind }
}

/** An ISO-8601 time parameter in ms (`fallback` when absent), or a 400 naming it. */
export function time (raw: string | null, name: string, fallback: number): number {
  if (raw === null || raw === '') return fallback
  const ms = Date.parse(raw)
  if (!/^\d{4}-\d{2}-\d{2}/.test(raw) || Number.isNaN(ms)) throw new ApiError('invalid_field', `${name} must be an ISO-8601 time, e.g. 2026-01-31T00:00:00Z.`, `/${name}`)
  return ms
}

function wholeNumber (raw: string | null, min: number, max: number, name: string, fallback: number): number {
  if (raw === null || raw === '') return fallback
  const n = Number(raw)
  if (!Number.isInteger(n) || n < min || n > max) throw new ApiError('invalid_field', `${name} must be a whole number from ${min} to ${max}.`, `/${name}`)
  return n
}
