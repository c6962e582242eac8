import { expect } from 'chai'
import {
  compileCampaigns, compileCondition, validateCampaign, validateCondition,
  type CampaignDef, type CampaignInput, type Condition, type MatchContext, type Scalar,
} from '../../src/matching/index.js'
import { indexPlan } from '../../src/matching/compile-campaigns.js'
import { closureCondition } from '../../src/matching/closure-condition.js'
import { generateCondition } from '../../src/matching/generate-condition.js'
import { evaluate, referenceMatch } from './reference.js'

// Seeded so a failure reproduces; the seed is in the assertion message.
function mulberry32 (seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

type Rand = () => number
const pick = <T>(r: Rand, list: readonly T[]): T => list[Math.floor(r() * list.length)] as T
const chance = (r: Rand, p: number): boolean => r() < p
const some = <T>(r: Rand, list: readonly T[], max: number): T[] => Array.from({ length: 1 + Math.floor(r() * max) }, () => pick(r, list))

// Small vocabularies so that rules and events collide often.
const STRINGS = ['a', 'b', 'ab', 'ba', '', 'A1', 'B2', '/x/y', '/x/z', 'pv']
const NUMBERS = [-1, 0, 1, 2, 2.5, 10]
const GLOBS = ['*', 'a*', '*b', 'a?', '?', '/x/*', '*/*', 'a*b', '/x/y']
const KINDS = ['pv', 'atc', 'buy']
const PLATFORMS = ['web', 'ios']
const DEVICES = ['m', 'd', 't']
const PATHS = ['/x/y', '/x/z', '/x', '/y/x/1', '/x/y/2', 'x']
const PATH_GLOBS = ['/x/*', '/x/y', '/y/*', '*', '/?/*', '*y', '/x/y/*', '/x/?', '/y/x/1']
// 'utm-source', '1st' and 'a.b:c' are not JS identifiers: generated code must use brackets.
const EVENT_FIELDS = ['sku', 'price', 'brand', 'tags', 'event', 'path', 'platform', 'utm-source', '1st', 'a.b:c']
const ATTRIBUTES = ['plan', 'age', 'vip', 'interests']
const SEGMENTS = ['s1', 's2', 's3']
const VISITOR_NUMBERS = ['pageViews', 'productViews', 'purchases', 'totalSpent', 'firstSeenSecondsAgo', 'lastSeenSecondsAgo']
const VISITOR_LISTS = ['viewedSkus', 'purchasedSkus', 'viewedCategories']
const BASE_MS = Date.UTC(2025, 5, 3, 12)

function scalar (r: Rand): Scalar {
  const k = r()
  return k < 0.55 ? pick(r, STRINGS) : k < 0.9 ? pick(r, NUMBERS) : chance(r, 0.5)
}

// Anything JSON can carry, including shapes no rule expects, plus missing (undefined).
function factValue (r: Rand): unknown {
  const k = r()
  if (k < 0.12) return undefined
  if (k < 0.17) return null
  if (k < 0.5) return pick(r, STRINGS)
  if (k < 0.75) return pick(r, NUMBERS)
  if (k < 0.82) return chance(r, 0.5)
  if (k < 0.95) return some(r, STRINGS, 3)
  return { nested: pick(r, STRINGS) }
}

function leaf (r: Rand): Condition {
  const k = r()
  if (k < 0.08) return { fact: 'segment', op: 'contains', value: pick(r, SEGMENTS) }
  if (k < 0.18) {
    const fact = `visitor.${pick(r, VISITOR_NUMBERS)}`
    const op = pick(r, ['eq', 'ne', 'in', 'nin', 'gt', 'gte', 'lt', 'lte', 'exists'] as const)
    return { fact, op, value: op === 'exists' ? chance(r, 0.5) : op === 'in' || op === 'nin' ? some(r, NUMBERS, 3) : pick(r, NUMBERS) }
  }
  if (k < 0.24) return { fact: `visitor.${pick(r, VISITOR_LISTS)}`, op: 'contains', value: pick(r, STRINGS) }
  if (k < 0.28) {
    const fact = pick(r, ['time.hour', 'time.weekday'])
    const op = pick(r, ['eq', 'gte', 'lt', 'in'] as const)
    return { fact, op, value: op === 'in' ? [0, 3, 12, 13] : pick(r, [0, 3, 12, 13]) }
  }
  const fact = chance(r, 0.7) ? `event.${pick(r, EVENT_FIELDS)}` : `attribute.${pick(r, ATTRIBUTES)}`
  const op = pick(r, ['eq', 'eq', 'in', 'in', 'ne', 'nin', 'gt', 'gte', 'lt', 'lte', 'contains', 'startsWith', 'endsWith', 'glob', 'exists'] as const)
  switch (op) {
    case 'eq': case 'ne': case 'contains': return { fact, op, value: scalar(r) }
    // Lists longer than 8 compile to a Set rather than inline comparisons.
    case 'in': case 'nin': return { fact, op, value: Array.from({ length: chance(r, 0.15) ? 9 + Math.floor(r() * 4) : 1 + Math.floor(r() * 3) }, () => scalar(r)) }
    case 'gt': case 'gte': case 'lt': case 'lte': return { fact, op, value: pick(r, NUMBERS) }
    case 'startsWith': case 'endsWith': return { fact, op, value: pick(r, STRINGS) }
    case 'glob': return { fact, op, value: pick(r, GLOBS) }
    case 'exists': return { fact, op, value: chance(r, 0.5) }
  }
}

function condition (r: Rand, depth: number): Condition {
  const k = r()
  if (depth >= 4 || k < 0.45) return leaf(r)
  if (k < 0.7) return { all: Array.from({ length: 1 + Math.floor(r() * 4) }, () => condition(r, depth + 1)) }
  if (k < 0.9) return { any: Array.from({ length: 1 + Math.floor(r() * 4) }, () => condition(r, depth + 1)) }
  return { not: condition(r, depth + 1) }
}

const iso = (ms: number): string => new Date(ms).toISOString()
const BOUNDARIES_MS = [BASE_MS - 3_600_000, BASE_MS, BASE_MS + 3_600_000]

function campaign (r: Rand): CampaignDef {
  const def: CampaignDef = {
    name: 'p',
    status: chance(r, 0.1) ? 'paused' : 'active',
    priority: pick(r, [0, 1, 2]),
    trigger: {},
    content: { n: Math.floor(r() * 1000) },
  }
  if (chance(r, 0.4)) def.trigger.events = some(r, KINDS, 2)
  if (chance(r, 0.3)) def.trigger.platforms = some(r, PLATFORMS, 2)
  if (chance(r, 0.3)) def.trigger.devices = some(r, DEVICES, 2)
  if (chance(r, 0.3)) def.trigger.paths = some(r, PATH_GLOBS, 2)
  if (chance(r, 0.03)) {
    // Wider than the trigger tree files (over 64 cells): some dimensions get tested per candidate.
    def.trigger.events = [...some(r, KINDS, 2), ...Array.from({ length: 30 }, (_, i) => `k${i}`)]
    def.trigger.devices = [...DEVICES]
  }
  if (chance(r, 0.2)) def.startsAt = iso(pick(r, BOUNDARIES_MS))
  if (chance(r, 0.2)) def.endsAt = iso(pick(r, BOUNDARIES_MS) + 3_600_000)
  if (def.startsAt !== undefined && def.endsAt !== undefined && Date.parse(def.endsAt) <= Date.parse(def.startsAt)) delete def.endsAt
  if (chance(r, 0.85)) {
    // Often lead with a keyable eq/in so the field groups of the index get exercised.
    const rule = condition(r, 1)
    def.rule = chance(r, 0.5) ? { all: [{ fact: `event.${pick(r, ['sku', 'brand'])}`, op: chance(r, 0.5) ? 'eq' : 'in', value: chance(r, 0.5) ? pick(r, STRINGS) : some(r, STRINGS, 3) } as Condition, rule] } : rule
    if ('all' in def.rule && 'op' in (def.rule.all[0] as object)) {
      const first = def.rule.all[0] as { op: string, value: unknown }
      if (first.op === 'eq' && Array.isArray(first.value)) first.value = first.value[0]
      if (first.op === 'in' && !Array.isArray(first.value)) first.value = [first.value]
    }
  }
  return def
}

function context (r: Rand): MatchContext {
  const event: Record<string, unknown> = {}
  for (const f of EVENT_FIELDS) {
    const v = factValue(r)
    if (v !== undefined) event[f] = v
  }
  // Trigger fields are mostly well formed, sometimes missing or mistyped.
  if (chance(r, 0.85)) event.event = pick(r, KINDS)
  if (chance(r, 0.85)) event.platform = pick(r, PLATFORMS)
  if (chance(r, 0.85)) event.device = pick(r, DEVICES)
  if (chance(r, 0.85)) event.path = pick(r, PATHS)
  const attributes: Record<string, unknown> = {}
  for (const a of ATTRIBUTES) {
    const v = factValue(r)
    if (v !== undefined) attributes[a] = v
  }
  const nowMs = chance(r, 0.3) ? pick(r, BOUNDARIES_MS) + pick(r, [-1, 0, 1, 3_600_000]) : BASE_MS + Math.floor((r() - 0.5) * 86_400_000)
  return {
    event,
    attributes,
    segments: new Set(SEGMENTS.filter(() => chance(r, 0.4))),
    visitor: {
      pageViews: pick(r, NUMBERS), productViews: pick(r, NUMBERS), purchases: pick(r, NUMBERS), totalSpent: pick(r, NUMBERS),
      firstSeenMs: nowMs - pick(r, [0, 999, 1000, 2000, 10_500]), lastSeenMs: nowMs - pick(r, [0, 1000, 2500]),
      viewedSkus: STRINGS.filter(() => chance(r, 0.2)), purchasedSkus: STRINGS.filter(() => chance(r, 0.1)), viewedCategories: STRINGS.filter(() => chance(r, 0.2)),
    },
    nowMs,
  }
}

describe('property: compiled matcher agrees with the reference interpreter', () => {
  it('evaluates 40,000 random (condition × context) pairs identically, generated and closure-built', () => {
    const r = mulberry32(0xbeac0)
    let trues = 0
    for (let i = 0; i < 4000; i++) {
      const cond = condition(r, 1)
      expect(validateCondition(cond), JSON.stringify(cond)).to.deep.equal([])
      const compilers = { compiled: compileCondition(cond), generated: generateCondition(cond), closures: closureCondition(cond) }
      for (let j = 0; j < 10; j++) {
        const c = context(r)
        const want = evaluate(cond, c)
        for (const [name, predicate] of Object.entries(compilers)) {
          if (predicate(c) !== want) expect.fail(`${name} case ${i}/${j}: ${JSON.stringify(cond)} on ${JSON.stringify({ ...c, segments: [...c.segments] })}`)
        }
        if (want) trues++
      }
    }
    // Guard against a generator so lopsided that agreement is trivial.
    expect(trues).to.be.within(4000, 36000)
  })

  it('matches 20,000 random (campaign set × event) pairs with the same ids in the same order', () => {
    const r = mulberry32(0x5eed)
    let matched = 0
    let keyed = 0
    for (let s = 0; s < 400; s++) {
      const size = 1 + Math.floor(r() * 40)
      const campaigns: CampaignInput[] = Array.from({ length: size }, (_, i) => ({ id: `c${Math.floor(r() * 1000)}-${i}`, def: campaign(r) }))
      for (const { def } of campaigns) expect(validateCampaign(def), JSON.stringify(def)).to.deep.equal([])
      keyed += indexPlan(campaigns).filter(p => p.place !== 'tree').length
      const set = compileCampaigns(campaigns)
      for (let e = 0; e < 50; e++) {
        const c = context(r)
        const got = set.match(c).map(m => m.id)
        const want = referenceMatch(campaigns, c).map(m => m.id)
        if (JSON.stringify(got) !== JSON.stringify(want)) {
          expect.fail(`set ${s} event ${e}: got ${JSON.stringify(got)} want ${JSON.stringify(want)}\n${JSON.stringify(campaigns)}\n${JSON.stringify({ ...c, segments: [...c.segments] })}`)
        }
        if (got.length > 0) matched++
      }
    }
    expect(matched, 'events that matched something').to.be.above(4000)
    expect(keyed, 'campaigns filed under a field or path key').to.be.above(500)
  })
})
