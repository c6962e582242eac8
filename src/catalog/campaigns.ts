// Campaigns: each account's definitions and the set requests match against, compiled from them (in
// slices, off the request path, when they change).

import type { Store } from '../store/store.js'
import { CAMPAIGNS_MAX } from '../store/limits.js'
import type { Page } from '../store/paging.js'
import { compileCampaigns, compileCampaignsSliced, type BanditWeights, type CampaignDef, type CampaignSet } from '../matching/index.js'
import type { AccountCatalog } from './accounts.js'
import { ConfigRows, type ConfigCatalog, type ConfigKey, type PageRequest } from './config-rows.js'
import type { ConfigWriter } from '../store/config-writer.js'
import type { Clock } from '../clock.js'

/** A campaign build runs in slices of this much work, the event loop serving requests in between. */
export const COMPILE_SLICE_MS = 5

interface CompiledCampaigns {
  /**
   * What requests match against: swapped whole when a build finishes, so requests keep using the
   * previous set while the next one is built. Null until first used after start (then compiled at once).
   */
  compiled: CampaignSet | null
  /** Bumped by every change; `compiledVersion` is the version `compiled` was built from. */
  version: number
  compiledVersion: number
  /** A build is under way (at most one per account; a change during it starts another after it). */
  building: boolean
}

export class CampaignCatalog implements ConfigCatalog {
  readonly rowKinds = ['campaign']
  private readonly accounts: AccountCatalog
  private readonly rows: ConfigRows<CampaignDef>
  private readonly sets = new Map<string, CompiledCampaigns>()
  /** Per account, the bandits' current weights by campaign id (src/jobs/bandit-reweighting.ts sets them). */
  private readonly banditWeights = new Map<string, Map<string, readonly number[]>>()
  /** Cluster mode: changes go through the replicated configuration (Catalogs.replicate); null: embedded. */
  writer: ConfigWriter | null = null

  private readonly clock: Clock

  constructor (store: Store, accounts: AccountCatalog, clock: Clock) {
    this.accounts = accounts
    this.clock = clock
    this.rows = new ConfigRows({
      store, kind: 'campaign', max: CAMPAIGNS_MAX, limitMessage: 'An account has at most %d campaigns; delete some first.', notFound: 'campaign_not_found',
    })
  }

  load ([account, , id]: ConfigKey, value: unknown): void {
    this.rows.set(account, id!, value as CampaignDef)
    this.setOf(account)
  }

  /** Built in slices from the start; a request that comes before its account's build is done compiles at once. */
  loaded (): void {
    for (const account of this.sets.keys()) this.build(account)
  }

  forget (account: string): void {
    this.rows.forget(account)
    this.sets.delete(account)
    this.banditWeights.delete(account)
  }

  /** Every campaign whose experiment is a bandit (allocation "bandit") with its revision, over all accounts. */
  bandits (): Array<{ account: string, id: string, def: CampaignDef }> {
    const found: Array<{ account: string, id: string, def: CampaignDef }> = []
    for (const account of this.sets.keys()) {
      for (const [id, def] of this.rows.of(account) ?? []) if (def.allocation === 'bandit' && def.revision !== undefined) found.push({ account, id, def })
    }
    return found
  }

  /**
   * The bandit's new weights for the campaign (normalized, one per variant): compiled into the account's
   * set off the request path, as after a change; no new revision (the design is the same).
   */
  setBanditWeights (account: string, id: string, weights: readonly number[]): void {
    let byId = this.banditWeights.get(account)
    const previous = byId?.get(id)
    if (previous !== undefined && previous.length === weights.length && previous.every((w, i) => w === weights[i])) return
    if (byId === undefined) this.banditWeights.set(account, byId = new Map())
    byId.set(id, weights)
    if (this.sets.has(account)) this.rebuild(account)
  }

  /** A new revision starts from the configured weights: the bandit's of the previous one are dropped. */
  private staleWeights (account: string, id: string, next: CampaignDef): void {
    const previous = this.rows.find(account, id)
    if (previous?.revision !== next.revision) this.banditWeights.get(account)?.delete(id)
  }

  private weightsOf (account: string): BanditWeights {
    return this.banditWeights.get(account) ?? NO_WEIGHTS
  }

  /** Cluster mode: the campaign changed in the replicated configuration; built again as after a write here. */
  apply ([account, , id]: ConfigKey, value: unknown): void {
    if (value === null) {
      if (!this.rows.has(account, id!)) return
      this.rows.delete(account, id!)
    } else {
      this.staleWeights(account, id!, value as CampaignDef)
      this.rows.set(account, id!, value as CampaignDef)
    }
    this.rebuild(account)
  }

  /**
   * The account's compiled campaigns, or null when it has none. After a change this is the previous set
   * until the new one is built (in slices, off the request path: `rebuild`); only a request that comes
   * before the first build after start is done, with no previous set to serve, compiles at once.
   */
  compiledSet (account: string): CampaignSet | null {
    const entry = this.sets.get(account)
    if (entry === undefined) return null
    const defs = this.rows.of(account)
    if (entry.compiled === null && defs !== undefined && defs.size > 0) {
      entry.compiled = compileCampaigns(campaignInputs(defs), this.weightsOf(account))
      entry.compiledVersion = entry.version
    }
    return entry.compiled
  }

  list (account: string, page: PageRequest): Page<{ id: string, campaign: CampaignDef }> {
    this.accounts.get(account)
    return this.rows.list(account, page, (id, campaign) => ({ id, campaign }))
  }

  /** Whether the account has this campaign (no throw: for counting). */
  has (account: string, id: string): boolean { return this.rows.has(account, id) }

  get (account: string, id: string): CampaignDef {
    this.accounts.get(account)
    return this.rows.get(account, id)
  }

  /** Saves the campaign; answers it as saved (with its experiment's revision). */
  async put (account: string, id: string, def: CampaignDef): Promise<CampaignDef> {
    if (this.writer !== null) {
      let saved = def
      await this.writer.change(account, () => {
        this.accounts.get(account)
        this.rows.checkLimit(account, id)
        saved = withRevision(def, this.rows.has(account, id) ? this.rows.get(account, id) : undefined, this.clock.nowMs())
        return [{ row: this.rows.row(account, id), value: saved }]
      })
      return saved
    }
    this.accounts.get(account)
    this.setOf(account)
    let saved = def
    await this.rows.reserve(account, id, async () => {
      saved = withRevision(def, this.rows.has(account, id) ? this.rows.get(account, id) : undefined, this.clock.nowMs())
      await this.rows.save(account, id, saved)
      this.staleWeights(account, id, saved)
      this.rows.set(account, id, saved)
      this.rebuild(account)
    })
    return saved
  }

  async delete (account: string, id: string): Promise<void> {
    if (this.writer !== null) {
      await this.writer.change(account, () => {
        this.get(account, id)
        return [{ row: this.rows.row(account, id), value: null }]
      })
      return
    }
    this.get(account, id)
    await this.rows.remove(account, id)
    this.rows.delete(account, id)
    this.rebuild(account)
  }

  /**
   * Build the account's campaigns again after a change, in slices of COMPILE_SLICE_MS; requests keep
   * matching the previous set until it is swapped in. A small account builds within the first slice,
   * before the change is answered; a large one within its build time after.
   */
  private rebuild (account: string): void {
    this.setOf(account).version++
    this.build(account)
  }

  /** Start a build of the current version unless one is under way (which starts the next when it ends). */
  private build (account: string): void {
    const entry = this.setOf(account)
    if (entry.building) return
    entry.building = true
    const version = entry.version
    const inputs = campaignInputs(this.rows.of(account) ?? new Map())
    compileCampaignsSliced(inputs, COMPILE_SLICE_MS, set => {
      entry.building = false
      if (version >= entry.compiledVersion) {
        entry.compiled = inputs.length === 0 ? null : set
        entry.compiledVersion = version
      }
      // An account deleted meanwhile has no entry any more: nothing to build.
      if (entry.version !== version && this.sets.get(account) === entry) this.build(account)
    }, this.weightsOf(account))
  }

  private setOf (account: string): CompiledCampaigns {
    let entry = this.sets.get(account)
    if (entry === undefined) this.sets.set(account, entry = { compiled: null, version: 0, compiledVersion: 0, building: false })
    return entry
  }
}

const NO_WEIGHTS: BanditWeights = new Map()

/**
 * The definition with its experiment's revision: the previous one's while the variants (ids and
 * weights), traffic, allocation, salt and goals stay the same, else the next one, starting now. Results are
 * per revision, so a reweighted experiment is not compared with what it was before.
 */
export function withRevision (def: CampaignDef, previous: CampaignDef | undefined, nowMs: number): CampaignDef {
  const { revision: _revision, revisionSince: _since, ...rest } = def
  // Without variants the last revision is kept, so variants added again start after it.
  if (def.variants === undefined) return previous?.revision === undefined ? rest : { ...rest, revision: previous.revision }
  if (previous?.variants !== undefined && previous.revision !== undefined && previous.revisionSince !== undefined && sameDesign(def, previous)) {
    return { ...rest, revision: previous.revision, revisionSince: previous.revisionSince }
  }
  return { ...rest, revision: (previous?.revision ?? 0) + 1, revisionSince: new Date(nowMs).toISOString() }
}

function sameDesign (a: CampaignDef, b: CampaignDef): boolean {
  const design = (d: CampaignDef): string => JSON.stringify([d.variants!.map(v => [v.id, v.weight, v.control === true]), d.trafficPercent ?? 100, d.allocation ?? 'fixed', d.salt ?? '', d.goals ?? []])
  return design(a) === design(b)
}

function campaignInputs (defs: ReadonlyMap<string, CampaignDef>): Array<{ id: string, def: CampaignDef }> {
  return [...defs].map(([id, def]) => ({ id, def }))
}
