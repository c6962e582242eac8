// The peers bench/match.ts measures Beacon's compiled matcher against, each given the same
// campaigns as one rule per campaign, with Beacon's semantics (docs/campaigns.md):
//
// - json-rules-engine: interpreted, async; built-in operators where their meaning is ours, custom
//   ones where it is not (ne and nin are false on a missing fact here, true there).
// - json-logic-engine, compiled mode (`engine.build`): each rule becomes one JavaScript function.
//   Its comparisons coerce (`null < 5` is true), so number, string and array guards are custom
//   methods, as are startsWith, endsWith and glob (not built in).
// - @gorules/zen-engine (Rust, Node bindings): one decision table, hit policy "collect", one row per
//   campaign whose cell is the campaign's whole rule as a ZEN expression, evaluated per event.
//
// Each peer reads facts prepared once per event, outside timing (a caller would do the same).

import { Engine, type RuleProperties, type TopLevelCondition } from 'json-rules-engine'
import { LogicEngine } from 'json-logic-engine'
import { ZenEngine, type ZenDecision } from '@gorules/zen-engine'
import type { CampaignInput, Condition, MatchContext, Scalar } from '../src/matching/index.js'
import { parseIsoMs } from '../src/matching/iso-time.js'
import { simpleGlob } from '../test/matching/reference.js'

/** Campaign ids in the answer's order: highest priority first, then id. */
export type Order = ReadonlyMap<string, number>

export function answerOrder (campaigns: readonly CampaignInput[]): Order {
  const order = new Map<string, number>()
  campaigns
    .filter(c => c.def.status === 'active')
    .sort((a, b) => b.def.priority - a.def.priority || (a.id < b.id ? -1 : 1))
    .forEach((c, i) => order.set(c.id, i))
  return order
}

const byOrder = (ids: string[], order: Order): string[] => ids.sort((a, b) => (order.get(a) ?? 0) - (order.get(b) ?? 0))

const isScalar = (v: unknown): boolean => typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean'

const active = (campaigns: readonly CampaignInput[]): CampaignInput[] => campaigns.filter(c => c.def.status === 'active')

// ---- facts -------------------------------------------------------------------------------------

/** One event's facts as nested data: event, attribute, segment (a list), visitor, time, nowMs. */
export function nestedFacts (ctx: MatchContext): Record<string, unknown> {
  const { visitor: vm, nowMs } = ctx
  const date = new Date(nowMs)
  return {
    event: ctx.event,
    attribute: ctx.attributes,
    segment: [...ctx.segments],
    visitor: {
      pageViews: vm.pageViews, productViews: vm.productViews, purchases: vm.purchases, totalSpent: vm.totalSpent,
      viewedSkus: vm.viewedSkus, purchasedSkus: vm.purchasedSkus, viewedCategories: vm.viewedCategories,
      firstSeenSecondsAgo: Math.floor((nowMs - vm.firstSeenMs) / 1000),
      lastSeenSecondsAgo: Math.floor((nowMs - vm.lastSeenMs) / 1000),
    },
    time: { hour: date.getUTCHours(), weekday: date.getUTCDay() },
    nowMs,
  }
}

/** json-rules-engine reads named facts: the nested facts flattened to "event.sku" and so on. */
export function flatFacts (ctx: MatchContext): Record<string, unknown> {
  const nested = nestedFacts(ctx)
  const facts: Record<string, unknown> = { nowMs: nested.nowMs, segment: nested.segment }
  for (const group of ['event', 'attribute', 'visitor', 'time']) {
    for (const [k, v] of Object.entries(nested[group] as Record<string, unknown>)) facts[`${group}.${k}`] = v
  }
  return facts
}

// ---- json-rules-engine -------------------------------------------------------------------------

const JRE_OPS: Record<string, string> = {
  eq: 'equal', ne: 'beaconNe', in: 'in', nin: 'beaconNin', gt: 'greaterThan', gte: 'greaterThanInclusive',
  lt: 'lessThan', lte: 'lessThanInclusive', contains: 'contains', startsWith: 'startsWith', endsWith: 'endsWith',
  glob: 'glob', exists: 'exists',
}

// json-rules-engine's own condition type is not exported; this is its JSON shape.
type NestedCondition = { all: NestedCondition[] } | { any: NestedCondition[] } | { not: NestedCondition } | { fact: string, operator: string, value: unknown }

function jreCondition (cond: Condition): NestedCondition {
  if ('all' in cond) return { all: cond.all.map(jreCondition) }
  if ('any' in cond) return { any: cond.any.map(jreCondition) }
  if ('not' in cond) return { not: jreCondition(cond.not) }
  return { fact: cond.fact, operator: JRE_OPS[cond.op] as string, value: cond.value }
}

function jreRule ({ id, def }: CampaignInput): RuleProperties {
  const all: NestedCondition[] = []
  const { events, platforms, devices, paths } = def.trigger
  if (events !== undefined) all.push({ fact: 'event.event', operator: 'in', value: events })
  if (platforms !== undefined) all.push({ fact: 'event.platform', operator: 'in', value: platforms })
  if (devices !== undefined) all.push({ fact: 'event.device', operator: 'in', value: devices })
  if (paths !== undefined) all.push({ any: paths.map(p => ({ fact: 'event.path', operator: 'glob', value: p })) })
  if (def.startsAt !== undefined) all.push({ fact: 'nowMs', operator: 'greaterThanInclusive', value: parseIsoMs(def.startsAt) })
  if (def.endsAt !== undefined) all.push({ fact: 'nowMs', operator: 'lessThan', value: parseIsoMs(def.endsAt) })
  if (def.rule !== undefined) all.push(jreCondition(def.rule))
  return { conditions: { all } as TopLevelCondition, event: { type: id }, priority: 1 }
}

export type JreMatcher = (facts: Record<string, unknown>) => Promise<string[]>

export function jreMatcher (campaigns: readonly CampaignInput[], order: Order): JreMatcher {
  const engine = new Engine(active(campaigns).map(jreRule), { allowUndefinedFacts: true })
  engine.addOperator('beaconNe', (a: unknown, b: unknown) => isScalar(a) && a !== b)
  engine.addOperator('beaconNin', (a: unknown, b: unknown[]) => isScalar(a) && !b.includes(a))
  engine.addOperator('startsWith', (a: unknown, b: string) => typeof a === 'string' && a.startsWith(b))
  engine.addOperator('endsWith', (a: unknown, b: string) => typeof a === 'string' && a.endsWith(b))
  engine.addOperator('glob', (a: unknown, b: string) => typeof a === 'string' && simpleGlob(b, a))
  engine.addOperator('exists', (a: unknown, b: boolean) => (a !== undefined && a !== null) === b)
  return async facts => {
    const { events } = await engine.run(facts)
    return byOrder(events.map(e => e.type), order)
  }
}

// ---- json-logic-engine, compiled ---------------------------------------------------------------

type Logic = Record<string, unknown>

const v = (fact: string): Logic => ({ var: fact })

function logicCondition (cond: Condition): Logic {
  if ('all' in cond) return { and: cond.all.map(logicCondition) }
  if ('any' in cond) return { or: cond.any.map(logicCondition) }
  if ('not' in cond) return { '!': logicCondition(cond.not) }
  const { fact, op, value } = cond
  const x = v(fact)
  switch (op) {
    case 'eq': return { '===': [x, value] }
    case 'ne': return { and: [{ isScalar: [x] }, { '!==': [x, value] }] }
    case 'in': return { and: [{ isScalar: [x] }, { in: [x, { preserve: value }] }] }
    case 'nin': return { and: [{ isScalar: [x] }, { '!': { in: [x, { preserve: value }] } }] }
    case 'gt': return { and: [{ isNumber: [x] }, { '>': [x, value] }] }
    case 'gte': return { and: [{ isNumber: [x] }, { '>=': [x, value] }] }
    case 'lt': return { and: [{ isNumber: [x] }, { '<': [x, value] }] }
    case 'lte': return { and: [{ isNumber: [x] }, { '<=': [x, value] }] }
    case 'contains': return { and: [{ isArray: [x] }, { in: [value, x] }] }
    case 'startsWith': return { startsWith: [x, value] }
    case 'endsWith': return { endsWith: [x, value] }
    case 'glob': return { glob: [x, value] }
    case 'exists': return value === true ? { '!=': [x, null] } : { '==': [x, null] }
  }
}

function logicRule ({ def }: CampaignInput): Logic {
  const all: Logic[] = []
  const { events, platforms, devices, paths } = def.trigger
  if (events !== undefined) all.push({ in: [v('event.event'), { preserve: events }] })
  if (platforms !== undefined) all.push({ in: [v('event.platform'), { preserve: platforms }] })
  if (devices !== undefined) all.push({ in: [v('event.device'), { preserve: devices }] })
  if (paths !== undefined) all.push({ or: paths.map(p => ({ glob: [v('event.path'), p] })) })
  if (def.startsAt !== undefined) all.push({ '>=': [v('nowMs'), parseIsoMs(def.startsAt)] })
  if (def.endsAt !== undefined) all.push({ '<': [v('nowMs'), parseIsoMs(def.endsAt)] })
  if (def.rule !== undefined) all.push(logicCondition(def.rule))
  return { and: all }
}

export type SyncMatcher = (facts: Record<string, unknown>) => string[]

export function jsonLogicMatcher (campaigns: readonly CampaignInput[], order: Order): SyncMatcher {
  const engine = new LogicEngine()
  const pure = { deterministic: true }
  engine.addMethod('isScalar', ([a]: unknown[]) => isScalar(a), pure)
  engine.addMethod('isNumber', ([a]: unknown[]) => typeof a === 'number', pure)
  engine.addMethod('isArray', ([a]: unknown[]) => Array.isArray(a), pure)
  engine.addMethod('startsWith', ([a, b]: unknown[]) => typeof a === 'string' && a.startsWith(b as string), pure)
  engine.addMethod('endsWith', ([a, b]: unknown[]) => typeof a === 'string' && a.endsWith(b as string), pure)
  engine.addMethod('glob', ([a, b]: unknown[]) => typeof a === 'string' && simpleGlob(b as string, a), pure)
  const rules = active(campaigns).map(c => ({ id: c.id, test: engine.build(logicRule(c)) as (data: unknown) => unknown }))
  return facts => {
    const ids: string[] = []
    for (const rule of rules) if (rule.test(facts) === true) ids.push(rule.id)
    return byOrder(ids, order)
  }
}

// ---- @gorules/zen-engine -----------------------------------------------------------------------

function zenString (s: string): string {
  if (/['\\]/.test(s)) throw new Error(`zen: a value with a quote or backslash is not translated: ${s}`)
  return `'${s}'`
}

const zenValue = (value: Scalar): string => typeof value === 'string' ? zenString(value) : String(value)
const zenList = (values: readonly Scalar[]): string => `[${values.map(zenValue).join(', ')}]`

/** A glob as an anchored regular expression: `*` any run of characters, `?` one, other characters literal. */
function zenGlob (x: string, pattern: string): string {
  const body = Array.from(pattern).map(c => {
    if (c === '*') return '.*'
    if (c === '?') return '.'
    if (/[[\]\\]/.test(c)) throw new Error(`zen: a glob with ${c} is not translated: ${pattern}`)
    return /[.+^${}()|]/.test(c) ? `[${c}]` : c
  }).join('')
  return `(type(${x}) == 'string' and matches(${x}, ${zenString(`^${body}$`)}))`
}

const ZEN_SCALAR = "type(X) in ['string', 'number', 'bool']"

function zenCondition (cond: Condition): string {
  if ('all' in cond) return `(${cond.all.map(zenCondition).join(' and ')})`
  if ('any' in cond) return `(${cond.any.map(zenCondition).join(' or ')})`
  if ('not' in cond) return `not(${zenCondition(cond.not)})`
  const { fact: x, op, value } = cond
  const scalar = ZEN_SCALAR.replace('X', x)
  const number = `type(${x}) == 'number'`
  switch (op) {
    case 'eq': return `${x} == ${zenValue(value as Scalar)}`
    case 'ne': return `(${scalar} and ${x} != ${zenValue(value as Scalar)})`
    case 'in': return `(${scalar} and ${x} in ${zenList(value as Scalar[])})`
    case 'nin': return `(${scalar} and not(${x} in ${zenList(value as Scalar[])}))`
    case 'gt': return `(${number} and ${x} > ${String(value)})`
    case 'gte': return `(${number} and ${x} >= ${String(value)})`
    case 'lt': return `(${number} and ${x} < ${String(value)})`
    case 'lte': return `(${number} and ${x} <= ${String(value)})`
    case 'contains': return `(type(${x}) == 'array' and contains(${x}, ${zenValue(value as Scalar)}))`
    case 'startsWith': return `(type(${x}) == 'string' and startsWith(${x}, ${zenValue(value as Scalar)}))`
    case 'endsWith': return `(type(${x}) == 'string' and endsWith(${x}, ${zenValue(value as Scalar)}))`
    case 'glob': return zenGlob(x, value as string)
    case 'exists': return value === true ? `${x} != null` : `${x} == null`
  }
}

function zenRule ({ def }: CampaignInput): string {
  const all: string[] = []
  const { events, platforms, devices, paths } = def.trigger
  if (events !== undefined) all.push(`event.event in ${zenList(events)}`)
  if (platforms !== undefined) all.push(`event.platform in ${zenList(platforms)}`)
  if (devices !== undefined) all.push(`event.device in ${zenList(devices)}`)
  if (paths !== undefined) all.push(`(${paths.map(p => zenGlob('event.path', p)).join(' or ')})`)
  if (def.startsAt !== undefined) all.push(`nowMs >= ${String(parseIsoMs(def.startsAt))}`)
  if (def.endsAt !== undefined) all.push(`nowMs < ${String(parseIsoMs(def.endsAt))}`)
  if (def.rule !== undefined) all.push(zenCondition(def.rule))
  return all.length === 0 ? 'true' : all.join(' and ')
}

export type AsyncMatcher = (facts: Record<string, unknown>) => Promise<string[]>

export interface ZenMatcher { match: AsyncMatcher, dispose: () => void }

export function zenMatcher (campaigns: readonly CampaignInput[], order: Order): ZenMatcher {
  const rules = active(campaigns).map((c, i) => ({ _id: `r${i}`, rule: zenRule(c), id: zenString(c.id) }))
  const content = {
    nodes: [
      { id: 'request', type: 'inputNode', name: 'request', position: { x: 0, y: 0 } },
      {
        id: 'campaigns',
        type: 'decisionTableNode',
        name: 'campaigns',
        position: { x: 200, y: 0 },
        content: { hitPolicy: 'collect', inputs: [{ id: 'rule', name: 'rule' }], outputs: [{ id: 'id', name: 'id', field: 'id' }], rules },
      },
      { id: 'response', type: 'outputNode', name: 'response', position: { x: 400, y: 0 } },
    ],
    edges: [
      { id: 'e1', sourceId: 'request', targetId: 'campaigns', type: 'edge' },
      { id: 'e2', sourceId: 'campaigns', targetId: 'response', type: 'edge' },
    ],
  }
  const engine = new ZenEngine()
  const decision: ZenDecision = engine.createDecision(content)
  return {
    match: async facts => {
      const { result } = await decision.evaluate(facts)
      return byOrder((result as Array<{ id: string }>).map(r => r.id), order)
    },
    dispose: () => engine.dispose(),
  }
}
