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

export const GOAL_METRICS = ['conversion', 'revenue', 'count'] as const
export type GoalMetric = typeof GOAL_METRICS[number]

export const ALLOCATIONS = ['fixed', 'bandit'] as const
export type Allocation = typeof ALLOCATIONS[number]

/** One arm of an experiment: its share of the experiment's traffic and what it shows. */
export interface VariantDef {
  id: string
  /** Positive; shares are weight / sum of weights. */
  weight: number
  /** Shown instead of the campaign's content (absent: the campaign's content). */
  content?: unknown
  /** A control variant gets no campaign; its exposures are recorded all the same. */
  control?: boolean
}

/** What an experiment measures: the first goal is the primary one. */
export interface GoalDef {
  /** The event type that counts. */
  event: string
  /** conversion: once per visitor; revenue: the sum of orderTotal (or value); count: events. */
  metric: GoalMetric
  /** Events count from first exposure until this many days after it. */
  windowDays: number
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
  /** An experiment: the variants visitors are assigned to (absent: every visitor gets `content`). */
  variants?: VariantDef[]
  /** The share of eligible visitors in the experiment, 0–100 (default 100); the others get `content`, uncounted. */
  trafficPercent?: number
  /** fixed (default): the weights as given; bandit: Thompson sampling on the primary goal. */
  allocation?: Allocation
  goals?: GoalDef[]
  /** Kept by the catalog: bumped when variants, weights or traffic change (results are per revision). */
  revision?: number
  /** Kept by the catalog: when the current revision started (ISO-8601). */
  revisionSince?: string
  /** Part of the assignment hash: a new salt reshuffles visitors (default ""). */
  salt?: string
}

/** A variant as compiled: its place in the experiment, its frozen content. */
export interface ExperimentVariant {
  readonly id: string
  readonly index: number
  readonly control: boolean
  /** Deep-frozen: the variant's content, or the campaign's when it has none. */
  readonly content: unknown
}

/** An experiment as compiled: what assignment and counting need, no store read and no allocation. */
export interface Experiment {
  readonly campaignId: string
  readonly revision: number
  /** Epoch ms the revision started. */
  readonly sinceMs: number
  /** The hash state after the campaign id and salt; the visitor id continues it. */
  readonly seed: number
  /** Variant i owns the buckets (0 to 2³²) from starts[i] (inclusive) to ends[i] (exclusive). */
  readonly starts: readonly number[]
  readonly ends: readonly number[]
  readonly variants: readonly ExperimentVariant[]
  readonly goals: readonly GoalDef[]
  readonly allocation: Allocation
  /** The weights in force (normalized): the configured ones, or the bandit's latest. */
  readonly weights: readonly number[]
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
  /** The campaign's experiment, or null when it has no variants. */
  readonly experiment: Experiment | null
}

export type Predicate = (ctx: MatchContext) => boolean

/** Immutable: built once per definition change and swapped whole by the caller. */
export interface CampaignSet {
  /** Campaigns in the index (paused ones are left out). */
  readonly size: number
  /** Eligible campaigns, highest priority first, then id ascending (code-unit order). */
  match (ctx: MatchContext): MatchedCampaign[]
  /** The experiment of a campaign of the set, paused ones included (their goals still count), or undefined. */
  experiment (campaignId: string): Experiment | undefined
}

/** Per visitor per campaign: lifetime count, and timestamps still inside the cap window. */
export interface ImpressionHistory {
  n: number
  t: number[]
}
