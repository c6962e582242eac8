// Bandit reweighting: every `intervalMs`, off the request path, each campaign with allocation
// "bandit" gets new weights by Thompson sampling (src/stats/bandit.ts) on its current revision's
// primary conversion goal: each variant's exposed visitors and conversions, read from the same
// counts as its results (every node's in cluster mode). The weights are compiled into the account's
// campaign set (CampaignCatalog.setBanditWeights), so assignment stays a hash with no lookup; only
// visitors not yet exposed follow them (the others keep their variant). The Monte Carlo's seed is
// made of the campaign, revision and counts, so nodes reading the same counts compute the same
// weights.

import type { CampaignCatalog } from '../catalog/campaigns.js'
import type { Clock } from '../clock.js'
import { seedOf } from '../matching/index.js'
import { DAY_MS, experimentKey, type StoredBucket } from '../reports/counters.js'
import { bucketStart, RANGE_MAX_DAYS } from '../reports/report.js'
import { thompsonWeights, type Arm } from '../stats/bandit.js'
import { seededRandom } from '../stats/random.js'

/** How often bandits are reweighted by default (BEACON_BANDIT_INTERVAL_MS). */
export const BANDIT_INTERVAL_MS = 60_000

export type DayBuckets = (account: string, fromMs: number, toMs: number) => Promise<Map<number, StoredBucket>>

export interface BanditReweightingOptions {
  campaigns: Pick<CampaignCatalog, 'bandits' | 'setBanditWeights'>
  buckets: DayBuckets
  clock: Clock
  intervalMs: number
  onError: (error: unknown) => void
}

export class BanditReweighting {
  private readonly options: BanditReweightingOptions
  private timer: NodeJS.Timeout | null = null
  private running: Promise<void> = Promise.resolve()

  constructor (options: BanditReweightingOptions) {
    this.options = options
  }

  start (): void {
    this.timer = setInterval(() => { this.run().catch(this.options.onError) }, this.options.intervalMs)
    this.timer.unref()
  }

  async stop (): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer)
    this.timer = null
    await this.running.catch(() => {})
  }

  /** One pass over every bandit (one at a time: a pass started during another waits for it). */
  run (): Promise<void> {
    this.running = this.running.then(() => this.pass(), () => this.pass())
    return this.running
  }

  private async pass (): Promise<void> {
    const { campaigns, buckets, clock } = this.options
    const nowMs = clock.nowMs()
    for (const { account, id, def } of campaigns.bandits()) {
      const sinceMs = def.revisionSince === undefined ? nowMs : Date.parse(def.revisionSince)
      const fromMs = Math.max(bucketStart(sinceMs, 'day'), bucketStart(nowMs, 'day') - (RANGE_MAX_DAYS.day - 1) * DAY_MS)
      const arms = armsOf(await buckets(account, fromMs, nowMs + 1), id, def.revision!, def.variants!.map(v => v.id))
      const seed = seedOf(id, String(def.revision), arms.map(a => `${a.visitors}/${a.conversions}`).join(','))
      campaigns.setBanditWeights(account, id, thompsonWeights(arms, seededRandom(seed)))
    }
  }
}

/** Each variant's exposed visitors and conversions of the primary goal (the first sum of goal 0). */
export function armsOf (buckets: ReadonlyMap<number, StoredBucket>, id: string, revision: number, variants: readonly string[]): Arm[] {
  const keys = variants.map(v => experimentKey(id, revision, v))
  const arms = variants.map(() => ({ visitors: 0, conversions: 0 }))
  for (const bucket of buckets.values()) {
    for (const [key, n, conversions] of bucket.experiments ?? []) {
      const i = keys.indexOf(key)
      if (i === -1) continue
      arms[i]!.visitors += n ?? 0
      arms[i]!.conversions += conversions ?? 0
    }
  }
  return arms
}
