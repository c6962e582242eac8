// TypeBox schemas the route definitions document with where the request schemas of schemas.ts do not
// reach: answers (success bodies), and admin bodies that are validated by hand-written code
// (campaigns: src/matching/validate-campaign.ts, segments: src/segments/rules.ts). These describe; they
// do not validate requests. The OpenAPI coverage test checks real answers against them.

import Type, { type TObject, type TSchema, type TUnsafe } from 'typebox'
import { MEDIA_TYPES } from '../media/signature.js'
import { NAME_PATTERN } from '../patterns.js'
import { RateLimit } from './schemas.js'
import { DELETION_PHASES } from '../jobs/account-deletion.js'
import { OPS, CAP_PERIODS, ALLOCATIONS, GOAL_METRICS } from '../matching/types.js'
import { CAP_MAX, CONTENT_SIZE_MAX_BYTES, GOAL_WINDOW_DAYS_MAX, GOALS_MAX, NAME_LENGTH_MAX, SALT_LENGTH_MAX, TRIGGER_VALUES_MAX, TRIGGER_VALUE_LENGTH_MAX, VARIANT_ID_LENGTH_MAX, VARIANTS_MAX } from '../matching/validate-campaign.js'
import { DEPTH_MAX, LEAVES_MAX } from '../matching/validate-condition.js'

/** Where the cyclic condition schemas live in the document (components are referenced, not inlined). */
export const REF = {
  Condition: '#/components/schemas/Condition',
  SegmentCondition: '#/components/schemas/SegmentCondition',
} as const

const ref = (pointer: string): TSchema => Type.Unsafe({ $ref: pointer })
const Name = Type.String({ pattern: NAME_PATTERN })
const Uuid = Type.String({ format: 'uuid' })
const Iso = Type.String({ format: 'date-time' })
// Typed as the union of the values' literals (the client's types read it: src/client/types.ts).
const literals = <const V extends readonly string[]>(values: V): TUnsafe<V[number]> => Type.Unsafe<V[number]>(Type.Union(values.map(value => Type.Literal(value))))

// ---- ops ----

export const Liveness = Type.Object({ status: Type.Literal('ok') })

export const Readiness = Type.Object({
  status: literals(['ready', 'not_ready']),
  reason: Type.Optional(Type.String({ description: 'Why not ready: the first failing check\'s message.' })),
  checks: Type.Array(Type.Object({
    name: literals(['lmdb', 'nats', 'cluster', 'draining']),
    ok: Type.Boolean(),
    message: Type.String(),
  })),
})

const PartitionList = Type.Array(Type.Integer({ minimum: 0 }))
export const RouteMap = Type.Object({
  version: Type.Integer({ minimum: 0, description: 'Changes whenever an owner or a node URL changes; the same on every node with the same view. Compare for equality.' }),
  partitions: Type.Integer({ minimum: 1, description: 'BEACON_PARTITIONS: a key\'s partition is partitionOf(account, id, partitions).' }),
  nodes: Type.Record(Type.String(), Type.Object({ url: Type.String({ description: 'The base URL clients reach the node at (BEACON_PUBLIC_URL).' }) }), { description: 'Every node named in `owners`, by id.' }),
  owners: Type.Array(Type.Union([Type.String(), Type.Null()]), { description: 'Per partition: the id of the node that owns it, or null (no owner, or its URL not known yet: send it to any node).' }),
})

export const ClusterStatus = Type.Object({
  cluster: Type.String({ description: 'BEACON_CLUSTER.' }),
  node: Type.String({ description: 'The id of the node that answered (BEACON_NODE_ID).' }),
  partitions: Type.Integer({ minimum: 1, description: 'BEACON_PARTITIONS, as stored in the cluster.' }),
  joined: Type.Boolean({ description: 'This node has joined and is not leaving.' }),
  owned: Type.Array(Type.Integer({ minimum: 0 }), { description: 'Partitions this node has recovered and serves.' }),
  changelogEntries: Type.Array(Type.Integer({ minimum: 0 }), { description: 'Per partition of `owned`: changelog entries since its last snapshot (replayed after the snapshot by a takeover; a snapshot is taken every 10,000).' }),
  recovering: Type.Array(Type.Integer({ minimum: 0 }), { description: 'Partitions whose lease this node holds, still being recovered.' }),
  unowned: Type.Array(Type.Integer({ minimum: 0 }), { description: 'Partitions without a live lease as this node sees them.' }),
  nodes: Type.Array(Type.Object({
    id: Type.String(),
    partitions: PartitionList,
    leaseAgesMs: Type.Array(Type.Integer({ minimum: 0 }), { description: 'Per partition: ms since its lease was last renewed, as the answering node saw it.' }),
  }), { description: 'Live nodes (and any node still holding a lease), by id.' }),
  routes: RouteMap,
})

export const MetricsText = Type.String({ description: 'Prometheus text exposition format 0.0.4.' })

export const OpenApiDocument = Type.Object({
  openapi: Type.String(),
  info: Type.Object({}, { additionalProperties: true }),
  paths: Type.Object({}, { additionalProperties: true }),
}, { additionalProperties: true })

// ---- public answers ----

const AttributeReply = Type.Unsafe<Record<string, Array<{ value: string | number | boolean }>>>(Type.Object({}, {
  additionalProperties: Type.Array(Type.Object({ value: Type.Union([Type.String(), Type.Number(), Type.Boolean()]) })),
  description: 'Attribute name → its values; a list attribute answers one {value} per element.',
}))

export const CampaignsAnswer = Type.Object({
  status: Type.Literal(200),
  message: Type.String(),
  campaigns: Type.Array(Type.Object({
    id: Type.String(),
    name: Type.String(),
    priority: Type.Integer(),
    content: Type.Unknown({ description: 'The campaign\'s content, as saved (in an experiment: the variant\'s).' }),
    variant: Type.Optional(Type.String({ description: 'The visitor\'s variant when the campaign runs an experiment.' })),
  }), { description: 'Eligible campaigns, highest priority first, then id.' }),
})

const NoErrors = Type.Array(Type.Unknown(), { maxItems: 0 })

export const BatchAnswer = Type.Object({
  status: Type.Literal(200),
  message: Type.String(),
  errors: NoErrors,
  results: Type.Array(Type.Object({
    status: Type.Integer({ description: '200: durable (or a duplicate messageId, applied before); otherwise the status the event alone would have got.' }),
    error: Type.Optional(Type.Object({
      code: Type.String(),
      field: Type.Optional(Type.String({ description: 'A JSON pointer into the event.' })),
      message: Type.String(),
    })),
    duplicate: Type.Optional(Type.Literal(true, { description: 'The messageId was applied before: acknowledged, not applied again.' })),
  }), { description: 'One outcome per event, in the order sent.' }),
})

export const EntityAnswer = Type.Object({
  status: Type.Literal(200),
  message: Type.String(),
  errors: NoErrors,
  attributes: AttributeReply,
  segments: Type.Array(Type.String()),
  profileId: Type.Optional(Type.String({ description: 'The profile a visitor is linked to (visitors only).' })),
})

export function savedAnswer (idField: 'profileId' | 'visitorId', withSegments: boolean): TSchema {
  return Type.Object({
    status: Type.Literal(200),
    [idField]: Type.String(),
    message: Type.String(),
    errors: NoErrors,
    ...(withSegments ? { segments: Type.Optional(Type.Array(Type.String(), { description: 'The manual segments after the change; absent for a write-only token (the list is a read).' })) } : {}),
  })
}

// ---- accounts and tokens ----

/** Every listing is a page: its items, and `next` to pass as `cursor` for the following page (null: the last). */
export const Next = Type.Union([Type.String(), Type.Null()], { description: 'Pass as `cursor` for the next page; null on the last page.' })

export const AccountRecord = Type.Object({
  account: Uuid, name: Type.String(), suspended: Type.Boolean(), createdAt: Iso,
  allowedOrigins: Type.Array(Type.String(), { description: 'Browser origins allowed to call the public API (docs/sdk.md).' }),
  identityVerification: Type.Union([Type.Literal('required'), Type.Literal('off')]),
  allowBrowserTokens: Type.Boolean(),
  requireConsent: Type.Boolean({ description: 'Destinations send only for people who consented to their purpose.' }),
  identitySecretSince: Type.Union([Iso, Type.Null()], { description: 'When the current identity secret was made; null: none yet.' }),
  previousIdentitySecretUntil: Type.Union([Iso, Type.Null()], { description: 'Until when the previous identity secret is accepted.' }),
  rateLimit: Type.Optional(RateLimit),
  holdoutPercent: Type.Optional(Type.Number({ description: 'The global holdout (absent: none).' })),
})
/** An answer that carries the account's new identity secret: shown only in this answer. */
export const AccountWithSecret = Type.Object({
  ...AccountRecord.properties,
  identitySecret: Type.String({ description: 'The identity secret (bis_…): sign profileIds with it on your backend. Shown only in this answer.' }),
})
/** An answer without a body (204). */
export const NoBody = Type.Null({ description: 'No body.' })
/** The JavaScript of the browser SDK. */
export const ScriptText = Type.String({ description: 'JavaScript.' })
export const AccountList = Type.Object({ accounts: Type.Array(AccountRecord), next: Next })
export const AccountDeletion = Type.Object({
  account: Uuid,
  name: Type.String(),
  state: Type.Union([Type.Literal('running'), Type.Literal('done')]),
  startedAt: Iso,
  finishedAt: Type.Union([Iso, Type.Null()]),
  phase: Type.Union([...DELETION_PHASES.map(name => Type.Literal(name)), Type.Null()], { description: 'The kind of records being removed now; null when done.' }),
  removed: Type.Object(Object.fromEntries(DELETION_PHASES.map(name => [name, Type.Integer()])), { description: 'Records removed so far, by kind.' }),
}, { description: 'The background removal of a deleted account\'s data.' })

const access = literals(['read', 'write', 'read-write'])
const tokenFields = {
  id: Type.String(),
  account: Uuid,
  name: Type.String(),
  attributes: Type.Array(Type.String()),
  access,
  ratePerSecond: Type.Union([Type.Integer(), Type.Null()]),
  createdAt: Iso,
  revokedAt: Type.Union([Iso, Type.Null()]),
}
export const TokenRecord = Type.Object(tokenFields)
export const TokenCreated = Type.Object({ ...tokenFields, token: Type.String({ description: 'The secret token, `bk_<id>_<secret>`: shown only in this answer.' }) })
export const TokenList = Type.Object({ tokens: Type.Array(TokenRecord), next: Next })

export const EventType = Type.Object({ name: Name, required: Type.Array(Type.String()) })
export const EventTypeList = Type.Object({ eventTypes: Type.Array(EventType, { description: 'Built-in ones first (on the first page).' }), next: Next })

export const NameDeleted = Type.Object({ name: Type.String(), deleted: Type.Literal(true) })
export const IdDeleted = Type.Object({ id: Type.String(), deleted: Type.Literal(true) })

// ---- campaigns ----

const Scalar = Type.Union([Type.String(), Type.Number(), Type.Boolean()])

/** The condition language (cyclic: registered as a component and referenced). */
export const Condition = Type.Union([
  Type.Object({ all: Type.Array(ref(REF.Condition), { minItems: 1 }) }, { additionalProperties: false }),
  Type.Object({ any: Type.Array(ref(REF.Condition), { minItems: 1 }) }, { additionalProperties: false }),
  Type.Object({ not: ref(REF.Condition) }, { additionalProperties: false }),
  Type.Object({
    fact: Type.String({ description: 'event.<field>, attribute.<name>, segment, visitor.<metric>, time.hour or time.weekday.' }),
    op: literals(OPS),
    value: Type.Union([Scalar, Type.Array(Scalar)]),
  }, { additionalProperties: false }),
], { description: `A condition: all/any/not of conditions, or a leaf {fact, op, value}. At most ${DEPTH_MAX} levels and ${LEAVES_MAX} leaves.` })

const triggerList = (description: string) =>
  Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: TRIGGER_VALUE_LENGTH_MAX }), { minItems: 1, maxItems: TRIGGER_VALUES_MAX, description }))

const campaignFields = {
  name: Type.String({ minLength: 1, maxLength: NAME_LENGTH_MAX }),
  status: literals(['active', 'paused']),
  priority: Type.Integer({ description: 'Higher first.' }),
  startsAt: Type.Optional(Type.String({ description: 'ISO-8601 with a zone; inclusive.' })),
  endsAt: Type.Optional(Type.String({ description: 'ISO-8601 with a zone; exclusive.' })),
  trigger: Type.Object({
    events: triggerList('Event types (omitted: any).'),
    platforms: triggerList('Platforms (omitted: any).'),
    devices: triggerList('Devices (omitted: any).'),
    paths: triggerList('Path globs, * and ? (omitted: any).'),
  }, { additionalProperties: false }),
  rule: Type.Optional(ref(REF.Condition)),
  frequencyCap: Type.Optional(Type.Object({
    max: Type.Integer({ minimum: 1, maximum: CAP_MAX }),
    per: literals(CAP_PERIODS),
  }, { additionalProperties: false })),
  content: Type.Unknown({ description: `Any JSON, at most ${CONTENT_SIZE_MAX_BYTES} bytes: answered as is.` }),
  variants: Type.Optional(Type.Array(Type.Object({
    id: Type.String({ minLength: 1, maxLength: VARIANT_ID_LENGTH_MAX, pattern: '^[A-Za-z0-9_.-]+$' }),
    weight: Type.Number({ exclusiveMinimum: 0, description: 'Share of the experiment: weight / sum of weights.' }),
    content: Type.Optional(Type.Unknown({ description: 'Shown instead of the campaign\'s content.' })),
    control: Type.Optional(Type.Boolean({ description: 'Gets no campaign; its exposures are recorded.' })),
  }, { additionalProperties: false }), { minItems: 2, maxItems: VARIANTS_MAX, description: 'An experiment (docs/experiments.md).' })),
  trafficPercent: Type.Optional(Type.Number({ minimum: 0, maximum: 100, description: 'Share of eligible visitors in the experiment (default 100).' })),
  allocation: Type.Optional(literals(ALLOCATIONS)),
  goals: Type.Optional(Type.Array(Type.Object({
    event: Type.String({ minLength: 1 }),
    metric: literals(GOAL_METRICS),
    windowDays: Type.Integer({ minimum: 1, maximum: GOAL_WINDOW_DAYS_MAX }),
  }, { additionalProperties: false }), { minItems: 1, maxItems: GOALS_MAX, description: 'The first is the primary goal.' })),
  revision: Type.Optional(Type.Integer({ minimum: 1, description: 'Kept by Beacon: bumped when variants, weights or traffic change.' })),
  revisionSince: Type.Optional(Type.String({ description: 'Kept by Beacon: when the revision started.' })),
  salt: Type.Optional(Type.String({ maxLength: SALT_LENGTH_MAX, description: 'Part of the assignment hash.' })),
}
export const CampaignPut = Type.Object(campaignFields, { additionalProperties: false })
export const Campaign = Type.Object({ id: Type.String(), ...campaignFields })
export const CampaignList = Type.Object({ campaigns: Type.Array(Campaign), next: Next })

// ---- segments ----

const WindowLeaf = Type.Object({
  fact: literals(['count', 'sum']),
  event: Name,
  field: Type.Optional(Type.String({ description: 'sum only: the numeric event field summed.' })),
  where: Type.Optional(ref(REF.Condition)),
  within: Type.Optional(Type.String({ pattern: '^[0-9]+[mhd]$', description: 'Nm, Nh or Nd, up to 90 days; omitted: all time.' })),
  op: literals(['eq', 'ne', 'gt', 'gte', 'lt', 'lte']),
  value: Type.Number(),
}, { additionalProperties: false })

export const SegmentCondition = Type.Union([
  Type.Object({ all: Type.Array(ref(REF.SegmentCondition), { minItems: 1 }) }, { additionalProperties: false }),
  Type.Object({ any: Type.Array(ref(REF.SegmentCondition), { minItems: 1 }) }, { additionalProperties: false }),
  Type.Object({ not: ref(REF.SegmentCondition) }, { additionalProperties: false }),
  WindowLeaf,
  ref(REF.Condition),
], { description: 'A campaign condition, plus count and sum leaves over time windows.' })

const segmentFields = {
  description: Type.Optional(Type.String({ maxLength: 1000 })),
  rule: Type.Optional(ref(REF.SegmentCondition)),
}
export const SegmentPut = Type.Object({
  ...segmentFields,
  backfill: Type.Optional(Type.Boolean({ description: 'A computed segment: evaluate it over the retained event log (docs/event-log.md, "Backfilling a segment"). Not stored.' })),
}, { additionalProperties: false, description: 'With a rule: computed. Without: manual.' })
export const Segment = Type.Object({
  name: Type.String(),
  ...segmentFields,
  members: Type.Optional(Type.Integer({ minimum: 0, description: 'GET only: visitors and profiles in it now, from counters moved on enter and exit (eventually consistent).' })),
})
export const SegmentList = Type.Object({ segments: Type.Array(Segment), next: Next })
export const SegmentBackfill = Type.Object({
  id: Type.String(), segment: Type.String(),
  state: Type.Union(['running', 'done', 'cancelled'].map(state => Type.Literal(state))),
  before: Type.String({ description: 'Logged events before this time are the backfill\'s; later ones counted live.' }),
  events: Type.Integer({ description: 'Logged events read so far.' }),
  visitors: Type.Integer({ description: 'Visitors whose counters it rebuilt.' }),
  members: Type.Integer({ description: 'Visitors and profiles in the segment now (as GET …/segments/{name}).' }),
  walked: Type.Boolean({ description: 'Every logged event before `before` was read.' }),
  createdAt: Type.String(), updatedAt: Type.String(), finishedAt: Type.Union([Type.String(), Type.Null()]),
  error: Type.Union([Type.String(), Type.Null()], { description: 'Why it was cancelled (the segment changed or was deleted).' }),
}, { description: 'A segment backfill and its progress.' })

// ---- webhooks ----

/** A webhook as GET answers it: its id beside the configuration, with secrets reading "[redacted]". */
export function webhookAnswer (config: TObject): TSchema {
  return Type.Object({ id: Type.String(), ...config.properties }, { additionalProperties: false, description: 'The webhook; secrets read "[redacted]".' })
}

const IsoOrNull = Type.Union([Iso, Type.Null()])

const Attempt = Type.Object({
  attempt: Type.Integer({ minimum: 1, description: 'Attempts are numbered from 1.' }),
  at: Iso,
  status: Type.Optional(Type.Integer()),
  latencyMs: Type.Number(),
  error: Type.Optional(Type.String()),
})

export const DeliveryRecord = Type.Object({
  id: Type.String({ description: '<outbox seq>.<webhook id> (cluster mode: <node>:<outbox seq>.<webhook id>, the node holding it): what a replay by id names.' }),
  messageId: Type.String({
    description: 'The webhook-id header of its requests (batchSize 1): its id, except for a row a new owner resent after a cluster takeover, sent under the id its first owner gave it.',
  }),
  webhookId: Type.String(),
  status: literals(['pending', 'failed', 'delivered', 'dead']),
  occurredAt: IsoOrNull,
  context: Type.Object({}, { additionalProperties: true, description: 'What the templates read: account, visitorId, profileId, event, eventFields, audience, change, attributes.' }),
  attempts: Type.Array(Attempt),
  nextAttempt: Type.Union([Type.Integer({ minimum: 1 }), Type.Null()], { description: 'The number the next attempt will have; null once delivered or dead.' }),
  dueAt: IsoOrNull,
  createdAt: IsoOrNull,
  updatedAt: IsoOrNull,
  replayedAt: IsoOrNull,
  replay: Type.Union([Type.String(), Type.Null()], { description: 'The id of the replay of the event log that made it (docs/event-log.md, "Replay"); null for a live delivery.' }),
})
export const DeliveryPage = Type.Object({
  deliveries: Type.Array(DeliveryRecord),
  next: Type.Union([Type.Integer(), Type.String(), Type.Null()], {
    description: 'Pass as ?after= for the next page, as it is; null on the last. Embedded mode: a whole number; cluster mode: an opaque string (each node\'s position).',
  }),
})
export const Replayed = Type.Object({ replayed: Type.Integer({ description: 'Deliveries queued again.' }) })

// ---- people (privacy) ----

const entityFields = {
  attributes: Type.Object({}, { additionalProperties: true }),
  segments: Type.Array(Type.String()),
}
export const VisitorSnapshot = Type.Object({
  visitorId: Type.String(),
  ...entityFields,
  computedSegments: Type.Array(Type.String()),
  profileId: Type.Union([Type.String(), Type.Null()]),
  firstSeen: IsoOrNull,
  lastSeen: IsoOrNull,
}, { additionalProperties: true, description: 'Everything held on the visitor: attributes, segments, tracked behaviour (times in ISO 8601), linked profile.' })
export const ProfileSnapshot = Type.Object({
  profileId: Type.String(),
  ...entityFields,
  computedSegments: Type.Array(Type.String()),
  visitors: Type.Array(Type.String(), { description: 'Linked visitors (devices).' }),
  devices: Type.Object({}, { additionalProperties: true, description: 'The copy kept of each linked device: attributes, segments, behaviour.' }),
}, { additionalProperties: true, description: 'Everything held on the profile, with its devices\' summaries.' })
export const PersonExport = Type.Object({ profileId: Type.String(), profile: ProfileSnapshot, visitors: Type.Array(VisitorSnapshot) })
export const Erased = Type.Object({
  profileId: Type.String(),
  erased: Type.Object({
    profiles: Type.Integer(),
    visitors: Type.Integer({ description: 'Devices erased: every visitor ever linked to the profile and still linked to it.' }),
    deliveries: Type.Integer({ description: 'Outbox rows and webhook delivery records (any status) carrying the profile or those visitors, removed.' }),
  }),
  keptVisitors: Type.Integer({ description: 'Devices once linked that belong to another profile now: kept, their link to this one removed.' }),
})
export const VisitorErased = Type.Object({
  visitorId: Type.String(),
  erased: Type.Object({ visitors: Type.Integer(), deliveries: Type.Integer() }),
  unlinkedFrom: Type.Union([Type.String(), Type.Null()], { description: 'The profile the visitor was linked to (its copy of the device is gone), or null.' }),
})

// ---- panel: sessions, users, audit log, media, trying, reports ----

export const User = Type.Object({
  id: Type.String(), account: Type.String(), email: Type.String(), name: Type.String(),
  role: Type.Union([Type.Literal('owner'), Type.Literal('editor'), Type.Literal('viewer')]), createdAt: Iso,
})
export const SessionAnswer = Type.Object({ user: User })
export const SessionState = Type.Object({ signedIn: Type.Boolean(), user: Type.Optional(User) })
export const UserList = Type.Object({ users: Type.Array(User) })

const AuditEntry = Type.Object({
  id: Type.String({ description: 'Also the cursor position.' }),
  at: Iso,
  actor: Type.Union([
    Type.Object({ type: Type.Literal('admin') }),
    Type.Object({ type: Type.Literal('user'), id: Type.String(), email: Type.String() }),
  ]),
  action: Type.String({ description: 'create, update, delete, replay, erase, revoke or sign-in.' }),
  entity: Type.String({ description: 'campaign, segment, webhook, event-type, token, user, media, account, profile or visitor.' }),
  entityId: Type.String(),
  summary: Type.String({ description: 'What changed, shortly: `field: before → after` for updates; secrets never appear.' }),
})
export const LoggedEvent = Type.Object({
  id: Type.String({ description: '`<timeMs>-<seq>`: unique in the log.' }),
  time: Iso,
  visitorId: Type.String(),
  profileId: Type.Optional(Type.String({ description: 'The profile the visitor was linked to when the event was applied.' })),
  kind: Type.String({ description: 'The event type.' }),
  fields: Type.Record(Type.String(), Type.Unknown(), { description: 'Every other field the event carried (never its token).' }),
  segments: Type.Optional(Type.Array(Type.String(), { description: 'The segments the visitor was in once the event was applied (absent: none, or logged before segments were kept).' })),
})
export const EventLogPage = Type.Object({ events: Type.Array(LoggedEvent), next: Type.Union([Type.String(), Type.Null()], { description: 'Pass as `cursor` for the next (older) page; null: the range is done.' }) })
export const AuditPage = Type.Object({ entries: Type.Array(AuditEntry), next: Type.Union([Type.String(), Type.Null()]) })

export const Media = Type.Object({
  id: Type.String(), name: Type.String(), type: Type.Union(MEDIA_TYPES.map(type => Type.Literal(type))),
  bytes: Type.Integer(), url: Type.String({ description: 'The public URL path: /media/<account>/<id>.' }), createdAt: Iso,
})

const CHECKS = ['status', 'schedule', 'trigger', 'platform', 'condition', 'cap'] as const
export const Explanation = Type.Object({
  matched: Type.Boolean({ description: 'Whether /campaigns/query would return the campaign for this event and visitor state.' }),
  checks: Type.Array(Type.Object({ check: Type.Union(CHECKS.map(c => Type.Literal(c))), ok: Type.Boolean(), detail: Type.String() })),
})
export const TestDelivery = Type.Object({
  ok: Type.Boolean({ description: 'The target answered 2xx.' }),
  status: Type.Union([Type.Integer(), Type.Null()], { description: 'The HTTP status, null when none came (connection error, timeout, refused target).' }),
  durationMs: Type.Integer(),
  error: Type.Optional(Type.String()),
})

const Count = Type.Integer({ minimum: 0 })
const Ms = Type.Union([Type.Number(), Type.Null()])
const ReportRow = Type.Object({
  t: Iso,
  events: Type.Record(Type.String(), Count, { description: 'Events per kind.' }),
  visitors: Type.Integer({ description: 'Unique visitors: a HyperLogLog estimate (±2.3 % standard error).' }),
  campaigns: Type.Record(Type.String(), Type.Object({ impressions: Count, views: Count, clicks: Count })),
  segments: Type.Record(Type.String(), Type.Object({ enter: Count, exit: Count })),
  deliveries: Type.Object({ delivered: Count, failed: Count, dead: Count, p50Ms: Ms, p95Ms: Ms, p99Ms: Ms }),
})
export const Report = Type.Object({
  granularity: Type.Union([Type.Literal('hour'), Type.Literal('day')]),
  from: Iso, to: Iso,
  lagMs: Type.Integer({ description: 'How late the numbers may be: each node folds its counts into the store this often (BEACON_REPORT_FOLD_MS).' }),
  rows: Type.Array(ReportRow),
})

// ---- experiment results ----

const LiftInterval = Type.Object({ estimate: Type.Number(), low: Type.Number(), high: Type.Number(), standardError: Type.Number() })
const GoalComparison = Type.Object({
  variant: Type.String(), goal: Type.Integer({ description: 'Index in goals; 0 is the primary goal.' }), event: Type.String(), metric: Type.String(),
  lift: Type.Union([Type.Null(), Type.Object({
    absolute: LiftInterval,
    relative: Type.Union([LiftInterval, Type.Null()]),
    pValue: Type.Number({ description: 'Fixed-horizon two-sided p-value: valid for one look at a sample size fixed in advance.' }),
    sequential: Type.Object({ pValue: Type.Number(), low: Type.Number(), high: Type.Number() }, { description: 'Always valid (mSPRT): may be read at every look.' }),
    cuped: Type.Object({ absolute: LiftInterval, relative: Type.Union([LiftInterval, Type.Null()]), theta: Type.Number() }),
  })], { description: 'null while either side has fewer than 2 visitors.' }),
})
const Results = Type.Object({
  campaignId: Type.String(), revision: Type.Integer(), baseline: Type.String(),
  variants: Type.Array(Type.Object({
    id: Type.String(), control: Type.Boolean(), weight: Type.Union([Type.Number(), Type.Null()]), visitors: Type.Integer(),
    goals: Type.Array(Type.Object({ event: Type.String(), metric: Type.String(), total: Type.Number(), mean: Type.Number() })),
  })),
  comparisons: Type.Array(GoalComparison),
  sampleRatio: Type.Union([Type.Null(), Type.Object({ chiSquare: Type.Number(), degreesOfFreedom: Type.Integer(), pValue: Type.Number(), mismatch: Type.Boolean() })]),
  series: Type.Array(Type.Object({ t: Iso, visitors: Type.Array(Type.Integer()), lift: Type.Array(Type.Union([Type.Null(), Type.Object({ estimate: Type.Number(), low: Type.Number(), high: Type.Number() })])) })),
  warnings: Type.Array(Type.Object({ code: Type.String(), message: Type.String() })),
})
export const ExperimentResults = Type.Object({
  ...Results.properties,
  revisionSince: Type.Union([Iso, Type.Null()]),
  revisions: Type.Array(Type.Integer(), { description: 'Every revision of the experiment so far (older results: ?revision=N).' }),
  allocation: Type.String(),
  holdout: Type.Union([Type.Null(), Results], { description: 'The account\'s global holdout against the personalized visitors (purchases), when it has one.' }),
})
