// The shapes shared by validation, compilation, the reference interpreter and callers.
// Definitions arrive as JSON, so every type here is plain data (no Dates, no Maps).

export const OPS = [
  'eq', 'ne', 'in', 'nin', 'gt', 'gte', 'lt', 'lte',
  'contains', 'startsWith', 'endsWith', 'glob', 'exists',
] as const
export type Op = typeof OPS[number]

export type Scalar = string | number | boolean

export interface LeafCondition {
  fact: string
  op: Op
  value: Scalar | readonly Scalar[]
}
export interface AllCondition { all: readonly Condition[] }
export interface AnyCondition { any: readonly Condition[] }
export interface NotCondition { not: Condition }
export type Condition = AllCondition | AnyCondition | NotCondition | LeafCondition

export interface Trigger {
  events?: readonly string[]
  platforms?: readonly string[]
  devices?: readonly string[]
  paths?: readonly string[]
}

export const CAP_PERIODS = ['hour', 'day', 'week', 'lifetime'] as const
export type CapPeriod = typeof CAP_PERIODS[number]

export interface FrequencyCap {
  max: number
  per: CapPeriod
}

export interface CampaignDef {
  name: string
  status: 'active' | 'paused'
  priority: number
  /** ISO-8601 with a zone (or a bare date, read as UTC midnight); inclusive. */
  startsAt?: string
  /** ISO-8601 with a zone (or a bare date, read as UTC midnight); exclusive. */
  endsAt?: string
  trigger: Trigger
  rule?: Condition
  frequencyCap?: FrequencyCap
  content: unknown
}

export interface CampaignInput {
  id: string
  def: CampaignDef
}

export interface VisitorMetrics {
  pageViews: number
  productViews: number
  purchases: number
  totalSpent: number
  firstSeenMs: number
  lastSeenMs: number
  viewedSkus: readonly string[]
  purchasedSkus: readonly string[]
  viewedCategories: readonly string[]
}

export interface MatchContext {
  event: Record<string, unknown>
  attributes: Record<string, unknown>
  segments: ReadonlySet<string>
  visitor: VisitorMetrics
  nowMs: number
}

export interface MatchedCampaign {
  readonly id: string
  readonly name: string
  readonly priority: number
  /** Deep-frozen and shared between matches: serialize it, never mutate it. */
  readonly content: unknown
  readonly cap: FrequencyCap | null
}

export type Predicate = (ctx: MatchContext) => boolean

/** Immutable: built once per definition change and swapped whole by the caller. */
export interface CampaignSet {
  /** Campaigns in the index (paused ones are left out). */
  readonly size: number
  /** Eligible campaigns, highest priority first, then id ascending (code-unit order). */
  match (ctx: MatchContext): MatchedCampaign[]
}

/** Per visitor per campaign: lifetime count, and timestamps still inside the cap window. */
export interface ImpressionHistory {
  n: number
  t: number[]
}
