// Replays of the retained event log over the admin API (docs/event-log.md, "Replay"): start one, read
// its progress, list them, cancel one. Owners and the admin key. Embedded mode: this folder's log; cluster
// mode: the cluster's stream, a replay running on the node that started it and read through any
// (src/jobs/cluster-replays.ts). Without a log (BEACON_EVENT_RETENTION_DAYS=0) every route answers 501
// event_log_not_kept.

import Type from 'typebox'
import { ApiError } from '../errors.js'
import type { Catalogs } from '../catalog/catalogs.js'
import { replayView, REPLAY_STATES, type ReplayService, type ReplayRequest } from '../jobs/replay.js'
import { NAME_PATTERN } from '../patterns.js'
import { NODE_JOB_ID } from '../cluster/node-jobs.js'
import { validator } from '../validator.js'
import { accountParam } from './access.js'
import { time } from './event-log-routes.js'
import { json, type RouteDefinition } from './route.js'
import type { Request } from './server.js'

const KINDS_MAX = 50

const ReplayCreate = Type.Object({
  from: Type.String({ minLength: 1, maxLength: 64, description: 'ISO-8601 time, inclusive: the first event\'s server time.' }),
  to: Type.String({ minLength: 1, maxLength: 64, description: 'ISO-8601 time, exclusive.' }),
  target: Type.Union([
    Type.Object({ webhook: Type.String({ pattern: NAME_PATTERN }) }, { additionalProperties: false }),
    Type.Object({ destination: Type.String({ pattern: NAME_PATTERN }) }, { additionalProperties: false }),
  ], { description: 'The one webhook (an event webhook) or native destination the events are resent to.' }),
  kinds: Type.Optional(Type.Array(Type.String({ pattern: NAME_PATTERN }), { minItems: 1, maxItems: KINDS_MAX, uniqueItems: true, description: 'Only these event kinds (default: every kind the target takes).' })),
}, { additionalProperties: false })
const validateCreate = validator(ReplayCreate)

const ReplayAnswer = Type.Object({
  id: Type.String(),
  state: Type.Union(REPLAY_STATES.map(state => Type.Literal(state))),
  from: Type.String(), to: Type.String(), target: Type.Object({}, { additionalProperties: true }), kinds: Type.Union([Type.Array(Type.String()), Type.Null()]),
  createdAt: Type.String(), updatedAt: Type.String(), finishedAt: Type.Union([Type.String(), Type.Null()]),
  read: Type.Integer({ description: 'Events of the range read so far.' }),
  queued: Type.Integer({ description: 'Deliveries made (new delivery ids, marked with the replay\'s id).' }),
  skipped: Type.Integer({ description: 'Events read but not sent: a kind the target does not take, or not among `kinds`.' }),
  delivered: Type.Integer(), failed: Type.Integer({ description: 'Dead after every attempt, or erased before.' }),
  inFlight: Type.Integer({ description: 'Deliveries queued, not delivered or dead yet.' }),
  walked: Type.Boolean({ description: 'Every event of the range was read.' }),
  error: Type.Union([Type.String(), Type.Null()]),
}, { description: 'A replay and its progress.' })

export interface ReplayRoutesDeps {
  catalogs: Catalogs
  /** The replays of this node's log, or of the cluster's; null: no log kept (retention 0): 501. */
  replays: ReplayService | null
}

export function replayRoutes ({ catalogs, replays }: ReplayRoutesDeps): RouteDefinition[] {
  const kept = (): ReplayService => {
    if (replays === null) throw new ApiError('event_log_not_kept')
    return replays
  }
  const replayId = (request: Request): string => {
    const id = request.params[1] ?? ''
    if (!NODE_JOB_ID.test(id)) throw new ApiError('replay_not_found')
    return id
  }
  const path = '/admin/accounts/:account/replays'
  return [{
    method: 'post', pattern: path, body: true, role: 'owner',
    doc: {
      summary: 'Replay past events to one webhook or destination',
      description: 'Resends the account\'s logged events of [from, to) (server time), oldest first, to one target, as new deliveries marked with the replay\'s id (the `Beacon-Replay` header, `{{replay}}`), through the delivery queue and its retries; at most BEACON_REPLAY_INFLIGHT_MAX of them unsettled at once. Answers 202 with the replay; follow it at GET …/replays/{id}. In cluster mode the replay runs on the node that answered, and is read or cancelled through any (docs/event-log.md). 501 `event_log_not_kept` without a log.',
      tag: 'Event log',
      body: { schema: ReplayCreate, example: { from: '2026-01-01T00:00:00Z', to: '2026-01-08T00:00:00Z', target: { webhook: 'crm' }, kinds: ['purchase'] } },
      ok: json(202, 'The replay, started.', ReplayAnswer),
      errors: ['account_not_found', 'invalid_field', 'webhook_not_found', 'destination_not_found', 'replay_target_refused', 'replay_limit', 'event_log_not_kept'],
    },
    async handler (request) {
      const account = accountParam(request, catalogs)
      const log = kept()
      const row = await log.create(account, replayRequest(request.body))
      return { status: 202, body: replayView(row) }
    },
  }, {
    method: 'get', pattern: path, body: false, role: 'owner',
    doc: {
      summary: 'List the replays', tag: 'Event log',
      description: 'The account\'s replays, newest first (the last 100 kept).',
      ok: json(200, 'The replays.', Type.Object({ replays: Type.Array(ReplayAnswer) })), errors: ['account_not_found', 'event_log_not_kept'],
    },
    async handler (request) {
      const account = accountParam(request, catalogs)
      return { status: 200, body: { replays: (await kept().list(account)).map(replayView) } }
    },
  }, {
    method: 'get', pattern: `${path}/:id`, body: false, role: 'owner',
    doc: {
      summary: 'Read a replay\'s progress', tag: 'Event log',
      ok: json(200, 'The replay.', ReplayAnswer), errors: ['account_not_found', 'replay_not_found', 'event_log_not_kept'],
    },
    async handler (request) {
      const account = accountParam(request, catalogs)
      const log = kept()
      return { status: 200, body: replayView(await log.get(account, replayId(request))) }
    },
  }, {
    method: 'post', pattern: `${path}/:id/cancel`, body: false, role: 'owner',
    doc: {
      summary: 'Cancel a replay', tag: 'Event log',
      description: 'Stops reading and queuing; deliveries already queued go on, and their outcomes are still counted. A replay that already ended is answered as it is.',
      ok: json(200, 'The replay, cancelled.', ReplayAnswer), errors: ['account_not_found', 'replay_not_found', 'event_log_not_kept'],
    },
    async handler (request) {
      const account = accountParam(request, catalogs)
      const log = kept()
      return { status: 200, body: replayView(await log.cancel(account, replayId(request))) }
    },
  }]
}

/** The body checked: the schema, then the times (ISO 8601, from before to). */
function replayRequest (body: unknown): ReplayRequest {
  const { from, to, target, kinds } = validateCreate(body)
  const fromMs = time(from, 'from', 0)
  const toMs = time(to, 'to', 0)
  if (fromMs >= toMs) throw new ApiError('invalid_field', 'from must be before to.', '/from')
  return { fromMs, toMs, target: 'webhook' in target ? { webhook: target.webhook } : { destination: target.destination }, kinds: kinds ?? null }
}
