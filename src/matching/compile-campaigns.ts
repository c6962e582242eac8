// Builds the immutable CampaignSet an account's events are matched against.
//
// Every active campaign becomes an Entry (schedule, trigger masks, compiled path globs, compiled
// rule, a frozen result object) and is filed in exactly one place of the index:
// - a field group: Map from a required event.*/attribute.* value to entries (e.g. event.sku);
// - the path index: exact paths, and literal directory prefixes such as "/c/shoes/";
// - otherwise the trigger tree: event kind → platform → device, each level with a wildcard
//   slot for campaigns that do not restrict that dimension.
// The place is the one an event is least likely to reach (index-plan.ts), so an event meets
// the campaigns that could match plus a few near misses, not the whole account. Whatever the
// place guarantees is left out of the entry's tests (the key leaf of the rule, tree-filed
// trigger dimensions, literal paths); everything else is tested on the candidate.
// Each campaign is reachable once per event at most, so no de-duplication is needed.
//
// The build is a generator that pauses every STEP_CAMPAIGNS campaigns of each pass over them:
// compileCampaigns runs it to the end at once; compileCampaignsSliced runs it a slice of time at a
// time, letting the event loop serve requests in between (an account of 10,000 campaigns takes
// longer than a request should ever wait).

import { compileCondition } from './compile-condition.js'
import { compileExperiment } from './experiment.js'
import { frozenJsonCopy } from './deep-freeze.js'
import { compileGlob, type StringTest } from './glob.js'
import { withoutLeaf, type FieldKey, type IndexKey, type PathKey } from './index-keys.js'
import { candidateKeys, groupId, planIndexSteps } from './index-plan.js'
import { parseIsoMs } from './iso-time.js'
import { ANY_MASK, assignBits, bitOf, maskOf, RARE_BIT, type Bits } from './trigger-bits.js'
import type { CampaignDef, CampaignInput, CampaignSet, Experiment, MatchContext, MatchedCampaign, Predicate, Trigger } from './types.js'

// One filed campaign. Trigger dimensions are bit masks (trigger-bits.ts); a dimension the index
// already guarantees has the all-ones mask. Fields are in test order, so a candidate that
// fails early reads only the start of its entry.
interface Entry {
  startMs: number
  endMs: number
  kindMask: number
  kindRare: ReadonlySet<unknown> | null
  platformMask: number
  platformRare: ReadonlySet<unknown> | null
  deviceMask: number
  deviceRare: ReadonlySet<unknown> | null
  path: StringTest | null
  rule: Predicate | null
  rank: number
  out: MatchedCampaign
}

// The campaigns filed under one key value or tree cell, in rank order. Most buckets hold a
// single campaign (a sku, a page), so that case is stored bare: one pointer less to chase.
type Bucket = Entry | readonly Entry[]

interface Level<T> {
  by: Map<unknown, T>
  any: T | null
}
type DeviceLevel<L> = Level<L>
type PlatformLevel<L> = Level<DeviceLevel<L>>
type KindLevel<L> = Level<PlatformLevel<L>>

interface FieldGroup<L> {
  fromEvent: boolean
  field: string
  byValue: Map<unknown, L>
}

interface PathIndex<L> {
  exact: Map<string, L>
  prefixes: Map<string, L>
  // hasPrefixLength[n]: some prefix is n characters long; avoids slicing for lengths never filed
  hasPrefixLength: boolean[]
}

interface DimensionBits { kinds: Bits, platforms: Bits, devices: Bits }

// Which trigger dimensions the tree guarantees for a tree-filed campaign.
interface Filed { kinds: readonly string[] | null, platforms: readonly string[] | null, devices: readonly string[] | null }

// A campaign filed in the tree under more cells than this has its widest dimension tested
// per candidate instead, so one campaign listing 100×100×100 values cannot bloat the tree.
const TREE_CELLS_MAX = 64

/** Campaigns handled between two pauses of the build. */
export const STEP_CAMPAIGNS = 64

/** The bandit's current weights per campaign id (normalized, one per variant), replacing the configured ones. */
export type BanditWeights = ReadonlyMap<string, readonly number[]>

const NO_WEIGHTS: BanditWeights = new Map()

export function compileCampaigns (campaigns: readonly CampaignInput[], weights: BanditWeights = NO_WEIGHTS): CampaignSet {
  return runToEnd(compileSteps(campaigns, weights))
}

/**
 * Compile in slices of about `sliceMs` of work, the event loop running in between (setImmediate), and
 * call `done` with the set. A build of at most STEP_CAMPAIGNS campaigns (one step each way) is done
 * before this returns, however long the process was paused meanwhile (a slice measured in wall time
 * would end early on a loaded machine); a larger one that fits in one slice too.
 */
export function compileCampaignsSliced (campaigns: readonly CampaignInput[], sliceMs: number, done: (set: CampaignSet) => void, weights: BanditWeights = NO_WEIGHTS): void {
  if (campaigns.length <= STEP_CAMPAIGNS) done(compileCampaigns(campaigns, weights))
  else runSlices(compileSteps(campaigns, weights), sliceMs, done)
}

function runSlices (steps: Generator<void, CampaignSet, void>, sliceMs: number, done: (set: CampaignSet) => void): void {
  const deadline = performance.now() + sliceMs
  for (;;) {
    const step = steps.next()
    if (step.done === true) return done(step.value)
    if (performance.now() >= deadline) {
      setImmediate(runSlices, steps, sliceMs, done)
      return
    }
  }
}

function runToEnd<T> (steps: Generator<void, T, void>): T {
  for (;;) {
    const step = steps.next()
    if (step.done === true) return step.value
  }
}

function * compileSteps (campaigns: readonly CampaignInput[], weights: BanditWeights): Generator<void, CampaignSet, void> {
  const { active, places } = yield * plan(campaigns)
  // Every campaign's experiment, paused ones too: their visitors' goals still count.
  const experiments = new Map<string, Experiment>()
  for (let i = 0; i < campaigns.length; i++) {
    const { id, def } = campaigns[i]!
    const experiment = def.variants === undefined ? null : compileExperiment(id, def, frozenJsonCopy(def.content), weights.get(id) ?? null)
    if (experiment !== null) experiments.set(id, experiment)
    if (i % STEP_CAMPAIGNS === STEP_CAMPAIGNS - 1) yield
  }
  const triggers = active.map(c => c.def.trigger)
  const bits: DimensionBits = {
    kinds: assignBits(triggers.map(t => t.events)),
    platforms: assignBits(triggers.map(t => t.platforms)),
    devices: assignBits(triggers.map(t => t.devices)),
  }
  yield
  const tree: KindLevel<Entry[]> = { by: new Map(), any: null }
  const groups = new Map<string, FieldGroup<Entry[]>>()
  const paths: PathIndex<Entry[]> = { exact: new Map(), prefixes: new Map(), hasPrefixLength: [] }
  // Ranks ascend in this loop, so every list in the index comes out already in result order.
  for (let rank = 0; rank < active.length; rank++) {
    const c = active[rank]!
    const key = places[rank] ?? null
    if (key === null) {
      const filed = treeDimensions(c.def.trigger)
      fileInTree(tree, filed, makeEntry(c.id, c.def, rank, bits, key, filed, experiments))
    } else if (key.kind === 'field') fileInGroup(groups, key, makeEntry(c.id, c.def, rank, bits, key, null, experiments))
    else fileInPaths(paths, key, makeEntry(c.id, c.def, rank, bits, key, null, experiments))
    if (rank % STEP_CAMPAIGNS === STEP_CAMPAIGNS - 1) yield
  }
  yield
  const packedTree = packLevel((p: PlatformLevel<Entry[]>) => packLevel((d: DeviceLevel<Entry[]>) => packLevel(pack, d), p), tree)
  yield
  const packedGroups = [...groups.values()].map(g => ({ ...g, byValue: packMap(g.byValue) }))
  yield
  const packedPaths = paths.exact.size + paths.prefixes.size > 0 ? { ...paths, exact: packMap(paths.exact), prefixes: packMap(paths.prefixes) } : null
  return Object.freeze({
    size: active.length,
    match: matcher(packedTree, packedGroups, packedPaths, bits),
    experiment: (campaignId: string) => experiments.get(campaignId),
  })
}

// Active campaigns in result order, and for each the key it is filed under (null: the tree).
function * plan (campaigns: readonly CampaignInput[]): Generator<void, { active: CampaignInput[], places: Array<IndexKey | null> }, void> {
  const active = campaigns.filter(c => c.def.status === 'active')
  yield
  active.sort((a, b) => b.def.priority - a.def.priority || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  yield
  const keys: IndexKey[][] = []
  for (let i = 0; i < active.length; i++) {
    keys.push(candidateKeys(active[i]!.def))
    if (i % STEP_CAMPAIGNS === STEP_CAMPAIGNS - 1) yield
  }
  return { active, places: yield * planIndexSteps(active.map(c => c.def), keys, STEP_CAMPAIGNS) }
}

/**
 * Where each active campaign is filed, in result order: 'tree', 'path', or 'event.<field>' /
 * 'attribute.<name>'. For tests and benchmark reports; matching never needs it.
 */
export function indexPlan (campaigns: readonly CampaignInput[]): Array<{ id: string, place: string }> {
  const { active, places } = runToEnd(plan(campaigns))
  return active.map((c, i) => {
    const key = places[i] ?? null
    const place = key === null ? 'tree' : key.kind === 'path' ? 'path' : `${key.source}.${key.field}`
    return { id: c.id, place }
  })
}

function makeEntry (id: string, def: CampaignDef, rank: number, bits: DimensionBits, key: IndexKey | null, filed: Filed | null, experiments: ReadonlyMap<string, Experiment>): Entry {
  const { trigger } = def
  const kinds = filed?.kinds == null ? maskOf(bits.kinds, trigger.events) : ANY_MASK
  const platforms = filed?.platforms == null ? maskOf(bits.platforms, trigger.platforms) : ANY_MASK
  const devices = filed?.devices == null ? maskOf(bits.devices, trigger.devices) : ANY_MASK
  // Literal paths found through the exact-path map need no glob test.
  const pathsGuaranteed = key !== null && key.kind === 'path' && key.prefixes.length === 0
  const globs = trigger.paths === undefined || pathsGuaranteed ? null : trigger.paths.map(compileGlob)
  const first = globs?.[0]
  const rule = def.rule === undefined ? null : key !== null && key.kind === 'field' ? withoutLeaf(def.rule, key.leaf) : def.rule
  const cap = def.frequencyCap === undefined ? null : Object.freeze({ max: def.frequencyCap.max, per: def.frequencyCap.per })
  return {
    startMs: def.startsAt === undefined ? -Infinity : parseIsoMs(def.startsAt) ?? Infinity,
    endMs: def.endsAt === undefined ? Infinity : parseIsoMs(def.endsAt) ?? -Infinity,
    kindMask: kinds.mask,
    kindRare: kinds.rare,
    platformMask: platforms.mask,
    platformRare: platforms.rare,
    deviceMask: devices.mask,
    deviceRare: devices.rare,
    path: globs === null ? null : globs.length === 1 && first !== undefined ? first : s => globs.some(g => g(s)),
    rule: rule === null ? null : compileCondition(rule),
    rank,
    out: Object.freeze({ id, name: def.name, priority: def.priority, content: frozenJsonCopy(def.content), cap, experiment: experiments.get(id) ?? null }),
  }
}

function fileInGroup (groups: Map<string, FieldGroup<Entry[]>>, key: FieldKey, entry: Entry): void {
  const id = groupId(key)
  let group = groups.get(id)
  if (group === undefined) groups.set(id, group = { fromEvent: key.source === 'event', field: key.field, byValue: new Map() })
  for (const v of key.values) push(group.byValue, v, entry)
}

function fileInPaths (paths: PathIndex<Entry[]>, key: PathKey, entry: Entry): void {
  for (const p of key.exact) push(paths.exact, p, entry)
  for (const p of key.prefixes) {
    push(paths.prefixes, p, entry)
    paths.hasPrefixLength[p.length] = true
  }
}

// The restricted dimensions the tree files the campaign under: the widest are dropped until it
// fits in TREE_CELLS_MAX cells; a dropped dimension is tested per candidate instead.
function treeDimensions (trigger: Trigger): Filed {
  const filed: Filed = {
    kinds: trigger.events === undefined ? null : [...new Set(trigger.events)],
    platforms: trigger.platforms === undefined ? null : [...new Set(trigger.platforms)],
    devices: trigger.devices === undefined ? null : [...new Set(trigger.devices)],
  }
  const cells = (): number => (filed.kinds?.length ?? 1) * (filed.platforms?.length ?? 1) * (filed.devices?.length ?? 1)
  while (cells() > TREE_CELLS_MAX) {
    const widest = (['kinds', 'platforms', 'devices'] as const)
      .reduce((a, b) => (filed[a]?.length ?? 0) >= (filed[b]?.length ?? 0) ? a : b)
    filed[widest] = null
  }
  return filed
}

function fileInTree (tree: KindLevel<Entry[]>, filed: Filed, entry: Entry): void {
  for (const kind of slots(filed.kinds)) {
    const platformLevel = slot(tree, kind, (): PlatformLevel<Entry[]> => ({ by: new Map(), any: null }))
    for (const platform of slots(filed.platforms)) {
      const deviceLevel = slot(platformLevel, platform, (): DeviceLevel<Entry[]> => ({ by: new Map(), any: null }))
      for (const device of slots(filed.devices)) slot(deviceLevel, device, (): Entry[] => []).push(entry)
    }
  }
}

const WILDCARD = Symbol('any')

function slots (list: readonly string[] | null): readonly unknown[] {
  return list === null ? [WILDCARD] : list
}

function slot<T> (level: Level<T>, key: unknown, make: () => T): T {
  if (key === WILDCARD) return level.any ?? (level.any = make())
  let child = level.by.get(key)
  if (child === undefined) level.by.set(key, child = make())
  return child
}

function pack (entries: Entry[]): Bucket {
  return entries.length === 1 ? entries[0] as Entry : entries
}

function packMap<K> (map: Map<K, Entry[]>): Map<K, Bucket> {
  return new Map([...map].map(([k, entries]) => [k, pack(entries)]))
}

function packLevel<A, B> (f: (a: A) => B, level: Level<A>): Level<B> {
  return {
    by: new Map([...level.by].map(([k, v]) => [k, f(v)])),
    any: level.any === null ? null : f(level.any),
  }
}

function push<K> (map: Map<K, Entry[]>, key: K, entry: Entry): void {
  const list = map.get(key)
  if (list === undefined) map.set(key, [entry])
  else list.push(entry)
}

function matcher (tree: KindLevel<Bucket>, groups: Array<FieldGroup<Bucket>>, paths: PathIndex<Bucket> | null, bits: DimensionBits): (ctx: MatchContext) => MatchedCampaign[] {
  // Hits are gathered in these arrays, reused across calls (match is synchronous and never
  // re-entered), so the only allocation per event is the result.
  const hitRanks: number[] = []
  const hitOuts: MatchedCampaign[] = []
  const groupCount = groups.length
  // The current event's context and trigger bits, shared by the helpers below.
  let ctx: MatchContext
  let kindBit = 0
  let platformBit = 0
  let deviceBit = 0

  function test (bucket: Bucket | undefined | null): void {
    if (bucket === undefined || bucket === null) return
    if (!Array.isArray(bucket)) {
      check(bucket as Entry)
      return
    }
    for (let i = 0; i < bucket.length; i++) check(bucket[i] as Entry)
  }

  function check (e: Entry): void {
    const c = ctx
    const nowMs = c.nowMs
    if (nowMs < e.startMs || nowMs >= e.endMs) return
    if ((e.kindMask & kindBit) === 0 || (kindBit === RARE_BIT && e.kindRare !== null && !e.kindRare.has(c.event.event))) return
    if ((e.platformMask & platformBit) === 0 || (platformBit === RARE_BIT && e.platformRare !== null && !e.platformRare.has(c.event.platform))) return
    if ((e.deviceMask & deviceBit) === 0 || (deviceBit === RARE_BIT && e.deviceRare !== null && !e.deviceRare.has(c.event.device))) return
    if (e.path !== null) {
      const path = c.event.path
      if (typeof path !== 'string' || !e.path(path)) return
    }
    if (e.rule !== null && !e.rule(c)) return
    hitRanks.push(e.rank)
    hitOuts.push(e.out)
  }

  function devices (level: DeviceLevel<Bucket> | undefined | null, device: unknown): void {
    if (level === undefined || level === null) return
    test(level.by.get(device))
    test(level.any)
  }

  function platforms (level: PlatformLevel<Bucket> | undefined | null, platform: unknown, device: unknown): void {
    if (level === undefined || level === null) return
    devices(level.by.get(platform), device)
    devices(level.any, device)
  }

  return function match (context: MatchContext): MatchedCampaign[] {
    const event = context.event
    const kind = event.event
    const platform = event.platform
    const device = event.device
    const path = event.path
    ctx = context
    // Normally empty already; cleared here too in case a previous call was interrupted.
    hitRanks.length = 0
    hitOuts.length = 0
    kindBit = bitOf(bits.kinds, kind)
    platformBit = bitOf(bits.platforms, platform)
    deviceBit = bitOf(bits.devices, device)

    platforms(tree.by.get(kind), platform, device)
    platforms(tree.any, platform, device)

    for (let g = 0; g < groupCount; g++) {
      const group = groups[g] as FieldGroup<Bucket>
      const v = group.fromEvent ? event[group.field] : context.attributes[group.field]
      if (v !== undefined && v !== null) test(group.byValue.get(v))
    }

    if (paths !== null && typeof path === 'string') {
      test(paths.exact.get(path))
      const has = paths.hasPrefixLength
      const max = has.length
      for (let i = path.indexOf('/'); i !== -1 && i < max; i = path.indexOf('/', i + 1)) {
        if (has[i + 1] === true) test(paths.prefixes.get(path.slice(0, i + 1)))
      }
    }

    const result = inRankOrder(hitRanks, hitOuts)
    hitRanks.length = 0
    hitOuts.length = 0
    return result
  }
}

// Each bucket is in rank order, but buckets interleave. Hits are usually a handful, sorted by
// insertion in place; a long list (an account of broad campaigns) is sorted by index instead.
function inRankOrder (ranks: number[], outs: MatchedCampaign[]): MatchedCampaign[] {
  const n = ranks.length
  if (n > 32) {
    const order = Array.from(ranks.keys()).sort((a, b) => (ranks[a] as number) - (ranks[b] as number))
    return order.map(i => outs[i] as MatchedCampaign)
  }
  for (let i = 1; i < n; i++) {
    const rank = ranks[i] as number
    const out = outs[i] as MatchedCampaign
    let j = i - 1
    while (j >= 0 && (ranks[j] as number) > rank) {
      ranks[j + 1] = ranks[j] as number
      outs[j + 1] = outs[j] as MatchedCampaign
      j--
    }
    ranks[j + 1] = rank
    outs[j + 1] = out
  }
  return outs.slice()
}
