// Builds the immutable CampaignSet an account's events are matched against.
//
// Every active campaign becomes an Entry (schedule, trigger sets, compiled path globs, compiled
// rule, a frozen result object) and is filed in exactly one place of the index:
// - a field group: Map from a required event.*/attribute.* value to entries (e.g. event.sku);
// - the path index: exact paths, and literal directory prefixes such as "/c/shoes/";
// - otherwise the trigger tree: event kind → platform → device, each level with a wildcard
//   slot for campaigns that do not restrict that dimension.
// The place is chosen by estimated selectivity (how many campaigns share the same key values),
// so an event meets only the campaigns that could match plus a few near misses. Whatever the
// index checked by construction is skipped; everything else is tested on the candidate.
// Each campaign is reachable once per event at most, so no de-duplication is needed.

import { compileCondition } from './compile-condition.js'
import { frozenJsonCopy } from './deep-freeze.js'
import { compileGlob, type StringTest } from './glob.js'
import { fieldKeys, pathKey, type FieldKey, type IndexKey, type PathKey } from './index-keys.js'
import { parseIsoMs } from './iso-time.js'
import type { CampaignDef, CampaignInput, CampaignSet, MatchContext, MatchedCampaign, Predicate } from './types.js'

interface Entry {
  rank: number
  startMs: number
  endMs: number
  // null when the dimension is unrestricted or already guaranteed by where the entry is filed
  kinds: ReadonlySet<unknown> | null
  platforms: ReadonlySet<unknown> | null
  devices: ReadonlySet<unknown> | null
  path: StringTest | null
  rule: Predicate | null
  out: MatchedCampaign
}

interface Level<T> {
  by: Map<unknown, T>
  any: T | null
}
type DeviceLevel = Level<Entry[]>
type PlatformLevel = Level<DeviceLevel>
type KindLevel = Level<PlatformLevel>

interface FieldGroup {
  fromEvent: boolean
  field: string
  byValue: Map<unknown, Entry[]>
}

interface PathIndex {
  exact: Map<string, Entry[]>
  prefixes: Map<string, Entry[]>
  // hasPrefixLength[n]: some prefix is n characters long; avoids slicing for lengths never filed
  hasPrefixLength: boolean[]
}

// A campaign filed in the tree under more cells than this has its widest dimension tested
// per candidate instead, so one campaign listing 100×100×100 values cannot bloat the tree.
const MAX_TREE_CELLS = 64

export function compileCampaigns (campaigns: readonly CampaignInput[]): CampaignSet {
  const { active, places } = plan(campaigns)
  const tree: KindLevel = { by: new Map(), any: null }
  const groups = new Map<string, FieldGroup>()
  const paths: PathIndex = { exact: new Map(), prefixes: new Map(), hasPrefixLength: [] }
  // Ranks ascend in this loop, so every list in the index comes out already in result order.
  active.forEach((c, rank) => {
    const entry = makeEntry(c.id, c.def, rank)
    const key = places[rank] ?? null
    if (key === null) fileInTree(tree, entry)
    else if (key.kind === 'field') fileInGroup(groups, key, entry)
    else fileInPaths(paths, key, entry)
  })
  return Object.freeze({
    size: active.length,
    match: matcher(tree, [...groups.values()], paths.exact.size + paths.prefixes.size > 0 ? paths : null),
  })
}

// Active campaigns in result order, and for each the key it is filed under (null: the tree).
function plan (campaigns: readonly CampaignInput[]): { active: CampaignInput[], places: Array<IndexKey | null> } {
  const active = campaigns
    .filter(c => c.def.status === 'active')
    .sort((a, b) => b.def.priority - a.def.priority || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  const keys = active.map(c => candidateKeys(c.def))
  const choose = chooser(active.map(c => c.def), keys)
  return { active, places: active.map((c, i) => choose(c.def, keys[i] as IndexKey[])) }
}

/**
 * Where each active campaign is filed, in result order: 'tree', 'path', or 'event.<field>' /
 * 'attribute.<name>'. For tests and benchmark reports; matching never needs it.
 */
export function indexPlan (campaigns: readonly CampaignInput[]): Array<{ id: string, place: string }> {
  const { active, places } = plan(campaigns)
  return active.map((c, i) => {
    const key = places[i] ?? null
    const place = key === null ? 'tree' : key.kind === 'path' ? 'path' : `${key.source}.${key.field}`
    return { id: c.id, place }
  })
}

function makeEntry (id: string, def: CampaignDef, rank: number): Entry {
  const { trigger } = def
  const globs = trigger.paths?.map(compileGlob) ?? null
  const first = globs?.[0]
  const cap = def.frequencyCap === undefined ? null : Object.freeze({ max: def.frequencyCap.max, per: def.frequencyCap.per })
  return {
    rank,
    startMs: def.startsAt === undefined ? -Infinity : parseIsoMs(def.startsAt) ?? Infinity,
    endMs: def.endsAt === undefined ? Infinity : parseIsoMs(def.endsAt) ?? -Infinity,
    kinds: setOrNull(trigger.events),
    platforms: setOrNull(trigger.platforms),
    devices: setOrNull(trigger.devices),
    path: globs === null ? null : globs.length === 1 && first !== undefined ? first : s => globs.some(g => g(s)),
    rule: def.rule === undefined ? null : compileCondition(def.rule),
    out: Object.freeze({ id, name: def.name, priority: def.priority, content: frozenJsonCopy(def.content), cap }),
  }
}

function setOrNull (list: readonly string[] | undefined): ReadonlySet<unknown> | null {
  return list === undefined ? null : new Set(list)
}

function candidateKeys (def: CampaignDef): IndexKey[] {
  const keys: IndexKey[] = fieldKeys(def.rule)
  const path = pathKey(def.trigger.paths)
  if (path !== null) keys.push(path)
  return keys
}

function groupId (key: FieldKey): string {
  return (key.source === 'event' ? 'e:' : 'a:') + key.field
}

// Counts how many campaigns offer each key value, then picks for each campaign the key whose
// values are shared by the fewest campaigns; the trigger tree is the fallback, scored by how
// many campaigns share the campaign's most selective trigger dimension.
function chooser (defs: CampaignDef[], keys: IndexKey[][]): (def: CampaignDef, keys: IndexKey[]) => IndexKey | null {
  const fieldCounts = new Map<string, Map<unknown, number>>()
  const exactCounts = new Map<string, number>()
  const prefixCounts = new Map<string, number>()
  const bump = <K>(map: Map<K, number>, k: K): void => { map.set(k, (map.get(k) ?? 0) + 1) }
  for (const list of keys) {
    for (const key of list) {
      if (key.kind === 'field') {
        const id = groupId(key)
        let counts = fieldCounts.get(id)
        if (counts === undefined) fieldCounts.set(id, counts = new Map())
        for (const v of key.values) bump(counts, v)
      } else {
        for (const p of key.exact) bump(exactCounts, p)
        for (const p of key.prefixes) bump(prefixCounts, p)
      }
    }
  }
  const dims = (['events', 'platforms', 'devices'] as const).map(dim => {
    const counts = new Map<string, number>()
    let open = 0
    for (const def of defs) {
      const values = def.trigger[dim]
      if (values === undefined) open++
      else for (const v of new Set(values)) bump(counts, v)
    }
    return { dim, counts, open }
  })
  const sum = <K>(map: Map<K, number>, ks: readonly K[]): number => ks.reduce((n, k) => n + (map.get(k) ?? 0), 0)
  const cost = (key: IndexKey): number => key.kind === 'field'
    ? sum(fieldCounts.get(groupId(key)) ?? new Map(), key.values)
    : sum(exactCounts, key.exact) + sum(prefixCounts, key.prefixes)
  return (def, list) => {
    let best: IndexKey | null = null
    let bestCost = defs.length
    for (const { dim, counts, open } of dims) {
      const values = def.trigger[dim]
      if (values !== undefined) bestCost = Math.min(bestCost, sum(counts, [...new Set(values)]) + open)
    }
    for (const key of list) {
      const c = cost(key)
      if (c < bestCost) { best = key; bestCost = c }
    }
    return best
  }
}

function fileInGroup (groups: Map<string, FieldGroup>, key: FieldKey, entry: Entry): void {
  const id = groupId(key)
  let group = groups.get(id)
  if (group === undefined) groups.set(id, group = { fromEvent: key.source === 'event', field: key.field, byValue: new Map() })
  for (const v of key.values) push(group.byValue, v, entry)
}

function fileInPaths (paths: PathIndex, key: PathKey, entry: Entry): void {
  for (const p of key.exact) push(paths.exact, p, entry)
  for (const p of key.prefixes) {
    push(paths.prefixes, p, entry)
    paths.hasPrefixLength[p.length] = true
  }
}

function fileInTree (tree: KindLevel, entry: Entry): void {
  // Drop the widest dimensions from the tree until the campaign fits in MAX_TREE_CELLS cells;
  // a dropped dimension stays on the entry and is tested per candidate.
  const filed = { kinds: entry.kinds, platforms: entry.platforms, devices: entry.devices }
  const cells = (): number => (filed.kinds?.size ?? 1) * (filed.platforms?.size ?? 1) * (filed.devices?.size ?? 1)
  while (cells() > MAX_TREE_CELLS) {
    const widest = (['kinds', 'platforms', 'devices'] as const)
      .reduce((a, b) => (filed[a]?.size ?? 0) >= (filed[b]?.size ?? 0) ? a : b)
    filed[widest] = null
  }
  if (filed.kinds !== null) entry.kinds = null
  if (filed.platforms !== null) entry.platforms = null
  if (filed.devices !== null) entry.devices = null
  for (const kind of slots(filed.kinds)) {
    const platformLevel = slot(tree, kind, (): PlatformLevel => ({ by: new Map(), any: null }))
    for (const platform of slots(filed.platforms)) {
      const deviceLevel = slot(platformLevel, platform, (): DeviceLevel => ({ by: new Map(), any: null }))
      for (const device of slots(filed.devices)) slot(deviceLevel, device, (): Entry[] => []).push(entry)
    }
  }
}

const WILDCARD = Symbol('any')

function slots (set: ReadonlySet<unknown> | null): Iterable<unknown> {
  return set === null ? [WILDCARD] : set
}

function slot<T> (level: Level<T>, key: unknown, make: () => T): T {
  if (key === WILDCARD) return level.any ?? (level.any = make())
  let child = level.by.get(key)
  if (child === undefined) level.by.set(key, child = make())
  return child
}

function push<K> (map: Map<K, Entry[]>, key: K, entry: Entry): void {
  const list = map.get(key)
  if (list === undefined) map.set(key, [entry])
  else list.push(entry)
}

function matcher (tree: KindLevel, groups: FieldGroup[], paths: PathIndex | null): (ctx: MatchContext) => MatchedCampaign[] {
  // Candidates that pass are gathered here; the array is reused across calls (match is
  // synchronous and never re-entered), so the only allocation per event is the result.
  const hits: Entry[] = []
  const groupCount = groups.length

  function test (list: Entry[] | undefined | null, ctx: MatchContext, kind: unknown, platform: unknown, device: unknown, path: unknown): void {
    if (list === undefined || list === null) return
    const nowMs = ctx.nowMs
    for (let i = 0; i < list.length; i++) {
      const e = list[i] as Entry
      if (nowMs < e.startMs || nowMs >= e.endMs) continue
      if (e.kinds !== null && !e.kinds.has(kind)) continue
      if (e.platforms !== null && !e.platforms.has(platform)) continue
      if (e.devices !== null && !e.devices.has(device)) continue
      if (e.path !== null && (typeof path !== 'string' || !e.path(path))) continue
      if (e.rule !== null && !e.rule(ctx)) continue
      hits.push(e)
    }
  }

  function devices (level: DeviceLevel | undefined | null, ctx: MatchContext, kind: unknown, platform: unknown, device: unknown, path: unknown): void {
    if (level === undefined || level === null) return
    test(level.by.get(device), ctx, kind, platform, device, path)
    test(level.any, ctx, kind, platform, device, path)
  }

  function platforms (level: PlatformLevel | undefined | null, ctx: MatchContext, kind: unknown, platform: unknown, device: unknown, path: unknown): void {
    if (level === undefined || level === null) return
    devices(level.by.get(platform), ctx, kind, platform, device, path)
    devices(level.any, ctx, kind, platform, device, path)
  }

  return function match (ctx: MatchContext): MatchedCampaign[] {
    const event = ctx.event
    const kind = event.event
    const platform = event.platform
    const device = event.device
    const path = event.path
    hits.length = 0

    platforms(tree.by.get(kind), ctx, kind, platform, device, path)
    platforms(tree.any, ctx, kind, platform, device, path)

    for (let g = 0; g < groupCount; g++) {
      const group = groups[g] as FieldGroup
      const v = group.fromEvent ? event[group.field] : ctx.attributes[group.field]
      if (v !== undefined && v !== null) test(group.byValue.get(v), ctx, kind, platform, device, path)
    }

    if (paths !== null && typeof path === 'string') {
      test(paths.exact.get(path), ctx, kind, platform, device, path)
      const has = paths.hasPrefixLength
      const max = has.length
      for (let i = path.indexOf('/'); i !== -1 && i < max; i = path.indexOf('/', i + 1)) {
        if (has[i + 1] === true) test(paths.prefixes.get(path.slice(0, i + 1)), ctx, kind, platform, device, path)
      }
    }

    const n = hits.length
    // Each index list is in rank order, but lists interleave; n is small, so insertion sort.
    for (let i = 1; i < n; i++) {
      const e = hits[i] as Entry
      let j = i - 1
      while (j >= 0 && (hits[j] as Entry).rank > e.rank) { hits[j + 1] = hits[j] as Entry; j-- }
      hits[j + 1] = e
    }
    const result = new Array<MatchedCampaign>(n)
    for (let i = 0; i < n; i++) result[i] = (hits[i] as Entry).out
    hits.length = 0
    return result
  }
}
