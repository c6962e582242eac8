// Report counting: in memory per node on the event path (a few map and array increments per event, no
// write, no allocation once an account's hour has started), folded into LMDB every
// BEACON_REPORT_FOLD_MS and on graceful stop. Per account and hour: events per kind, unique visitors
// (HyperLogLog), campaign impressions (the campaigns /campaigns/query answered) and views and clicks
// (events of the kinds campaignView and campaignClick, by their campaignId), segment enters and exits,
// webhook deliveries by outcome with a latency histogram. A fold merges each hour into its hour row
// and its day row ([account, 'hour' | 'day', startMs] in the reports db), and moves each segment's
// member count ([account, 'members', segment]) by the enters and exits since the last fold.

import { assert } from '../assert.js'
import type { Clock } from '../clock.js'
import type { Store } from '../store/store.js'
import { HyperLogLog } from './hll.js'
import { LATENCY_BUCKETS, latencyBucket } from './latency.js'

export const HOUR_MS = 3_600_000
export const DAY_MS = 86_400_000
/** Distinct keys (campaigns, segments) one account's hour counts at most; further ones are not counted. */
export const KEYS_MAX = 10_000

export type DeliveryOutcome = 'delivered' | 'retry' | 'dead'

/**
 * A folded bucket as stored (and merged). Keyed counts are lists of entries, not objects: the keys are
 * names sites choose, and a name such as "constructor" must stay a name.
 */
export interface StoredBucket {
  events: [kind: string, count: number][]
  visitors: Uint8Array | null
  campaigns: [id: string, impressions: number, views: number, clicks: number][]
  segments: [name: string, enter: number, exit: number][]
  /** [delivered, failed (an attempt to retry), dead] */
  deliveries: [number, number, number]
  latency: number[] | null
  /**
   * Experiment sums per `campaign \0 revision \0 variant`: [visitors exposed, then per goal Σy, Σy²,
   * Σx, Σx², Σxy] (src/stats/summary.ts). Absent in buckets of earlier releases.
   */
  experiments?: [key: string, ...sums: number[]][]
}

/** The numbers an experiment key keeps per goal. */
export const SUMS_PER_GOAL = 5

/** The key of an experiment's variant in a bucket. */
export function experimentKey (campaignId: string, revision: number, variant: string): string {
  return `${campaignId}\u0000${revision}\u0000${variant}`
}

class Pending {
  readonly account: string
  readonly hourMs: number
  readonly events = new Map<string, number>()
  visitors: HyperLogLog | null = null
  readonly campaigns = new Map<string, [number, number, number]>()
  readonly segments = new Map<string, [number, number]>()
  readonly deliveries: [number, number, number] = [0, 0, 0]
  latency: number[] | null = null
  readonly experiments = new Map<string, number[]>()

  constructor (account: string, hourMs: number) {
    this.account = account
    this.hourMs = hourMs
  }

  campaign (id: string): [number, number, number] | null {
    let counts = this.campaigns.get(id)
    if (counts === undefined) {
      if (this.campaigns.size >= KEYS_MAX) return null
      this.campaigns.set(id, counts = [0, 0, 0])
    }
    return counts
  }

  experiment (key: string, goals: number): number[] | null {
    let sums = this.experiments.get(key)
    if (sums === undefined) {
      if (this.experiments.size >= KEYS_MAX) return null
      this.experiments.set(key, sums = new Array<number>(1 + SUMS_PER_GOAL * goals).fill(0))
    }
    return sums
  }
}

export interface ReportCountersOptions {
  store: Store
  clock: Clock
  foldMs: number
  /** Whether the account has this campaign (views and clicks of unknown ids are not counted: they come from browsers). */
  hasCampaign: (account: string, id: string) => boolean
  onError: (error: unknown) => void
  /**
   * Cluster mode: a node's member count is its share (the enters minus the exits it counted), stored
   * as it is, below zero too (it may count exits of members another node counted in); only the
   * cluster's sum is floored at zero (src/reports/cluster-reports.ts). Embedded mode floors the stored count.
   */
  signedMembers?: boolean
}

export class ReportCounters {
  private readonly store: Store
  private readonly clock: Clock
  readonly foldMs: number
  private readonly hasCampaign: (account: string, id: string) => boolean
  private readonly onError: (error: unknown) => void
  private readonly signedMembers: boolean
  /** Per account, the hour being counted. */
  private current = new Map<string, Pending>()
  /** Hours that ended before the next fold. */
  private ended: Pending[] = []
  /** Per account and segment, members gained minus members lost since the last fold. */
  private members = new Map<string, Map<string, number>>()
  private timer: NodeJS.Timeout | null = null
  private folding: Promise<void> = Promise.resolve()

  constructor ({ store, clock, foldMs, hasCampaign, onError, signedMembers = false }: ReportCountersOptions) {
    this.store = store
    this.clock = clock
    this.foldMs = foldMs
    this.hasCampaign = hasCampaign
    this.onError = onError
    this.signedMembers = signedMembers
  }

  start (): void {
    this.timer = setInterval(() => { this.fold().catch(this.onError) }, this.foldMs)
    this.timer.unref()
  }

  /** Stop the timer and fold what is counted (graceful stop: before the store closes). */
  async stop (): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer)
    this.timer = null
    await this.fold()
  }

  /** One event answered by /campaigns/query, and the campaigns it was answered with. */
  event (account: string, kind: string, visitorId: string, campaigns: readonly { id: string }[], campaignId: unknown, nowMs: number): void {
    const bucket = this.bucket(account, nowMs)
    const events = bucket.events
    events.set(kind, (events.get(kind) ?? 0) + 1)
    ;(bucket.visitors ??= new HyperLogLog()).add(visitorId)
    for (let i = 0; i < campaigns.length; i++) {
      const counts = bucket.campaign(campaigns[i]!.id)
      if (counts !== null) counts[0]++
    }
    if ((kind === 'campaignView' || kind === 'campaignClick') && typeof campaignId === 'string' && this.hasCampaign(account, campaignId)) {
      const counts = bucket.campaign(campaignId)
      if (counts !== null) counts[kind === 'campaignView' ? 1 : 2]++
    }
  }

  /** A visitor's first exposure to an experiment's revision, with its covariate per goal (actors/experiments.ts). */
  readonly exposed = (account: string, campaignId: string, revision: number, variant: string, goals: number, x: readonly number[], nowMs: number): void => {
    const sums = this.bucket(account, nowMs).experiment(experimentKey(campaignId, revision, variant), goals)
    if (sums === null) return
    sums[0]!++
    for (let g = 0; g < goals && g < x.length; g++) {
      const at = 1 + SUMS_PER_GOAL * g
      sums[at + 2]! += x[g]!
      sums[at + 3]! += x[g]! * x[g]!
    }
  }

  /** A visitor's outcome of one goal moved from y0 to y1 (its covariate x): the sums move by the difference. */
  readonly outcome = (account: string, campaignId: string, revision: number, variant: string, goals: number, goal: number, x: number, y0: number, y1: number, nowMs: number): void => {
    const sums = this.bucket(account, nowMs).experiment(experimentKey(campaignId, revision, variant), goals)
    if (sums === null || goal >= goals) return
    const at = 1 + SUMS_PER_GOAL * goal
    sums[at]! += y1 - y0
    sums[at + 1]! += y1 * y1 - y0 * y0
    sums[at + 4]! += x * (y1 - y0)
  }

  /** A visitor or profile entered (+1) or left (-1) a segment. */
  readonly membership = (account: string, segment: string, delta: 1 | -1): void => {
    const bucket = this.bucket(account, this.clock.nowMs())
    let counts = bucket.segments.get(segment)
    if (counts === undefined) {
      if (bucket.segments.size >= KEYS_MAX) return
      bucket.segments.set(segment, counts = [0, 0])
    }
    counts[delta === 1 ? 0 : 1]++
    let deltas = this.members.get(account)
    if (deltas === undefined) this.members.set(account, deltas = new Map())
    deltas.set(segment, (deltas.get(segment) ?? 0) + delta)
  }

  /** `count` webhook deliveries settled with this outcome after an attempt that took latencyMs. */
  readonly delivery = (account: string, outcome: DeliveryOutcome, latencyMs: number, count: number): void => {
    assert(count >= 0, 'a settled delivery count is not negative')
    const bucket = this.bucket(account, this.clock.nowMs())
    bucket.deliveries[outcome === 'delivered' ? 0 : outcome === 'retry' ? 1 : 2] += count
    ;(bucket.latency ??= new Array<number>(LATENCY_BUCKETS).fill(0))[latencyBucket(latencyMs)]! += count
  }

  /** A segment's member count: the folded one plus what this node counted since (eventually consistent). */
  readonly membersOf = (account: string, segment: string): number => Math.max(0, this.memberShare(account, segment))

  /** This node's share of a segment's member count: the folded one plus what it counted since, not floored (cluster mode). */
  memberShare (account: string, segment: string): number {
    return ((this.store.reports.get([account, 'members', segment]) as number | undefined) ?? 0) + (this.members.get(account)?.get(segment) ?? 0)
  }

  /**
   * Resolves when no fold is between taking the counts out of memory and their commit: what the store
   * holds plus what is in memory, read in the same tick after this, is everything counted, once.
   */
  async settled (): Promise<void> {
    for (;;) {
      const folding = this.folding
      await folding.catch(() => {})
      if (folding === this.folding) return
    }
  }

  /** The account's counts not folded yet, per bucket of `granularity` starting in [firstMs, toMs). */
  pending (account: string, granularity: 'hour' | 'day', firstMs: number, toMs: number): Map<number, StoredBucket> {
    const buckets = new Map<number, StoredBucket>()
    const current = this.current.get(account)
    for (const pending of current === undefined ? this.ended : [...this.ended, current]) {
      if (pending.account !== account) continue
      const startMs = granularity === 'hour' ? pending.hourMs : pending.hourMs - pending.hourMs % DAY_MS
      if (startMs < firstMs || startMs >= toMs) continue
      buckets.set(startMs, mergeInto(buckets.get(startMs), pending))
    }
    return buckets
  }

  /** Merge everything counted so far into the store; concurrent calls run one after the other. */
  fold (): Promise<void> {
    this.folding = this.folding.then(() => this.foldNow(), () => this.foldNow())
    return this.folding
  }

  private bucket (account: string, nowMs: number): Pending {
    const hourMs = nowMs - nowMs % HOUR_MS
    const pending = this.current.get(account)
    if (pending !== undefined && pending.hourMs === hourMs) return pending
    if (pending !== undefined) this.ended.push(pending)
    const fresh = new Pending(account, hourMs)
    this.current.set(account, fresh)
    return fresh
  }

  private async foldNow (): Promise<void> {
    const buckets = [...this.ended, ...this.current.values()]
    const members = this.members
    if (buckets.length === 0 && members.size === 0) return
    this.ended = []
    this.current = new Map()
    this.members = new Map()
    const db = this.store.reports
    await db.transaction(() => {
      for (const pending of buckets) {
        for (const [granularity, startMs] of [['hour', pending.hourMs], ['day', pending.hourMs - pending.hourMs % DAY_MS]] as const) {
          const key = [pending.account, granularity, startMs]
          db.put(key, mergeInto(db.get(key) as StoredBucket | undefined, pending))
        }
      }
      for (const [account, deltas] of members) {
        for (const [segment, delta] of deltas) {
          const key = [account, 'members', segment]
          const count = ((db.get(key) as number | undefined) ?? 0) + delta
          db.put(key, this.signedMembers ? count : Math.max(0, count))
        }
      }
    })
  }
}

export const EMPTY_BUCKET: StoredBucket = Object.freeze({ events: [], visitors: null, campaigns: [], segments: [], deliveries: [0, 0, 0], latency: null }) as unknown as StoredBucket

/** Add `b` into `a` (a new bucket; neither input changes). */
export function mergeBuckets (a: StoredBucket, b: StoredBucket): StoredBucket {
  const events = new Map(a.events)
  for (const [kind, n] of b.events) events.set(kind, (events.get(kind) ?? 0) + n)
  const campaigns = new Map(a.campaigns.map(([id, ...counts]) => [id, counts]))
  for (const [id, ...counts] of b.campaigns) {
    const into = campaigns.get(id) ?? [0, 0, 0]
    campaigns.set(id, [into[0]! + counts[0], into[1]! + counts[1], into[2]! + counts[2]])
  }
  const segments = new Map(a.segments.map(([name, ...counts]) => [name, counts]))
  for (const [name, enter, exit] of b.segments) {
    const into = segments.get(name) ?? [0, 0]
    segments.set(name, [into[0]! + enter, into[1]! + exit])
  }
  let visitors = a.visitors
  if (b.visitors !== null) {
    const sketch = new HyperLogLog(a.visitors ?? undefined)
    sketch.merge(b.visitors)
    visitors = sketch.registers
  }
  let experiments = a.experiments
  if (b.experiments !== undefined && b.experiments.length > 0) {
    const sums = new Map((a.experiments ?? []).map(([key, ...values]) => [key, values]))
    for (const [key, ...values] of b.experiments) {
      const into = sums.get(key) ?? []
      const length = Math.max(into.length, values.length)
      const added = new Array<number>(length)
      for (let i = 0; i < length; i++) added[i] = (into[i] ?? 0) + (values[i] ?? 0)
      sums.set(key, added)
    }
    experiments = [...sums].map(([key, values]) => [key, ...values])
  }
  let latency = a.latency
  assert(a.latency === null || b.latency === null || a.latency.length === b.latency.length, 'merged latency histograms have the same buckets', { a: a.latency?.length, b: b.latency?.length })
  if (b.latency !== null) latency = a.latency === null ? b.latency.slice() : a.latency.map((n, i) => n + b.latency![i]!)
  return {
    events: [...events],
    visitors,
    campaigns: [...campaigns].map(([id, c]) => [id, c[0]!, c[1]!, c[2]!]),
    segments: [...segments].map(([name, c]) => [name, c[0]!, c[1]!]),
    deliveries: [a.deliveries[0] + b.deliveries[0], a.deliveries[1] + b.deliveries[1], a.deliveries[2] + b.deliveries[2]],
    latency,
    ...(experiments === undefined ? {} : { experiments }),
  }
}

function mergeInto (stored: StoredBucket | undefined, pending: Pending): StoredBucket {
  return mergeBuckets(stored ?? EMPTY_BUCKET, {
    events: [...pending.events],
    visitors: pending.visitors?.registers ?? null,
    campaigns: [...pending.campaigns].map(([id, c]) => [id, c[0], c[1], c[2]]),
    segments: [...pending.segments].map(([name, c]) => [name, c[0], c[1]]),
    deliveries: pending.deliveries,
    latency: pending.latency,
    experiments: [...pending.experiments].map(([key, sums]) => [key, ...sums]),
  })
}
