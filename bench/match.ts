// Campaign matching throughput: the compiled, indexed CampaignSet against the reference
// interpreter (every campaign's JSON walked per event) and json-rules-engine, on generated
// accounts of 10 .. 10,000 campaigns (bench/match-data.ts describes the model).
//
//   node --allow-natives-syntax --import tsx bench/match.ts
//
// Every implementation is first checked to return the same campaigns for all 1,000 events;
// then bench-node measures events per second, cycling through the same events.
// MATCH_BENCH_QUICK=1 shortens every measurement (for a smoke run, not for numbers).

import { cpus } from 'node:os'
import { Suite } from 'bench-node'
import { Engine, type RuleProperties, type TopLevelCondition } from 'json-rules-engine'
import { compileCampaigns, validateCampaign, type CampaignInput, type Condition, type MatchContext } from '../src/matching/index.js'
import { indexPlan } from '../src/matching/compile-campaigns.js'
import { parseIsoMs } from '../src/matching/iso-time.js'
import { referenceMatch, simpleGlob } from '../test/matching/reference.js'
import { makeCampaigns, makeCatalog, makeContexts, mulberry32, type AccountShape } from './match-data.js'

const QUICK = process.env.MATCH_BENCH_QUICK === '1'
const EVENTS = 1000
const ACCOUNT_SEED = 3
const JRE_SIZES = new Set([10, 100])

interface Account { label: string, size: number, shape: AccountShape, campaigns: CampaignInput[] }

// ---- json-rules-engine, given the same campaigns ---------------------------------------------

// Built-in operators where their meaning is ours; custom ones where it is not (ne and nin are
// false on a missing fact here, true there) or where there is no built-in.
const JRE_OPS: Record<string, string> = {
  eq: 'equal', ne: 'beaconNe', in: 'in', nin: 'beaconNin', gt: 'greaterThan', gte: 'greaterThanInclusive',
  lt: 'lessThan', lte: 'lessThanInclusive', contains: 'contains', startsWith: 'startsWith', endsWith: 'endsWith',
  glob: 'glob', exists: 'exists',
}

// json-rules-engine's own condition type is not exported; this is its JSON shape.
type NestedCondition = { all: NestedCondition[] } | { any: NestedCondition[] } | { not: NestedCondition } | { fact: string, operator: string, value: unknown }

const isScalar = (v: unknown): boolean => typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean'

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

function jreEngine (campaigns: CampaignInput[]): Engine {
  const engine = new Engine(campaigns.filter(c => c.def.status === 'active').map(jreRule), { allowUndefinedFacts: true })
  engine.addOperator('beaconNe', (a: unknown, b: unknown) => isScalar(a) && a !== b)
  engine.addOperator('beaconNin', (a: unknown, b: unknown[]) => isScalar(a) && !b.includes(a))
  engine.addOperator('startsWith', (a: unknown, b: string) => typeof a === 'string' && a.startsWith(b))
  engine.addOperator('endsWith', (a: unknown, b: string) => typeof a === 'string' && a.endsWith(b))
  engine.addOperator('glob', (a: unknown, b: string) => typeof a === 'string' && simpleGlob(b, a))
  engine.addOperator('exists', (a: unknown, b: boolean) => (a !== undefined && a !== null) === b)
  return engine
}

// json-rules-engine reads named facts; each event's context is flattened once, outside timing.
function jreFacts (ctx: MatchContext): Record<string, unknown> {
  const facts: Record<string, unknown> = { nowMs: ctx.nowMs, segment: [...ctx.segments] }
  for (const [k, v] of Object.entries(ctx.event)) facts[`event.${k}`] = v
  for (const [k, v] of Object.entries(ctx.attributes)) facts[`attribute.${k}`] = v
  const { visitor: vm, nowMs } = ctx
  Object.assign(facts, {
    'visitor.pageViews': vm.pageViews, 'visitor.productViews': vm.productViews, 'visitor.purchases': vm.purchases,
    'visitor.totalSpent': vm.totalSpent, 'visitor.viewedSkus': vm.viewedSkus, 'visitor.purchasedSkus': vm.purchasedSkus,
    'visitor.viewedCategories': vm.viewedCategories,
    'visitor.firstSeenSecondsAgo': Math.floor((nowMs - vm.firstSeenMs) / 1000),
    'visitor.lastSeenSecondsAgo': Math.floor((nowMs - vm.lastSeenMs) / 1000),
    'time.hour': new Date(nowMs).getUTCHours(),
    'time.weekday': new Date(nowMs).getUTCDay(),
  })
  return facts
}

async function jreMatch (engine: Engine, facts: Record<string, unknown>, order: Map<string, number>): Promise<string[]> {
  const { events } = await engine.run(facts)
  return events.map(e => e.type).sort((a, b) => (order.get(a) ?? 0) - (order.get(b) ?? 0))
}

// ---- setup and agreement checks --------------------------------------------------------------

const catalog = makeCatalog(mulberry32(1))
const contexts = makeContexts(mulberry32(2), catalog, EVENTS)
const accounts: Account[] = [
  ...[10, 100, 1000, 10_000].map(size => ({ label: size.toLocaleString('en-US'), size, shape: 'typical' as const })),
  { label: '10,000 untemplated', size: 10_000, shape: 'untemplated' as const },
  { label: '10,000 all broad', size: 10_000, shape: 'allBroad' as const },
].map(a => ({ ...a, campaigns: makeCampaigns(ACCOUNT_SEED, catalog, a.size, a.shape) }))

const same = (a: string[], b: string[]): boolean => a.length === b.length && a.every((x, i) => x === b[i])

interface Prepared {
  account: Account
  set: ReturnType<typeof compileCampaigns>
  compileMs: number
  matchesPerEvent: number
  places: string
  engine: Engine | null
  facts: Array<Record<string, unknown>>
  order: Map<string, number>
}

async function prepare (account: Account): Promise<Prepared> {
  for (const { id, def } of account.campaigns) {
    const errors = validateCampaign(def)
    if (errors.length > 0) throw new Error(`generated campaign ${id} is invalid: ${JSON.stringify(errors)}`)
  }
  const startMs = performance.now()
  const set = compileCampaigns(account.campaigns)
  const compileMs = performance.now() - startMs
  let matches = 0
  for (const ctx of contexts) {
    const got = set.match(ctx).map(m => m.id)
    const want = referenceMatch(account.campaigns, ctx).map(m => m.id)
    if (!same(got, want)) throw new Error(`${account.label}: compiled ${JSON.stringify(got)} but reference ${JSON.stringify(want)}`)
    matches += got.length
  }
  const counts = new Map<string, number>()
  for (const { place } of indexPlan(account.campaigns)) {
    const kind = place === 'tree' || place === 'path' ? place : 'field'
    counts.set(kind, (counts.get(kind) ?? 0) + 1)
  }
  const places = ['field', 'path', 'tree'].map(k => `${k} ${counts.get(k) ?? 0}`).join(', ')
  const order = new Map<string, number>()
  account.campaigns
    .filter(c => c.def.status === 'active')
    .sort((a, b) => b.def.priority - a.def.priority || (a.id < b.id ? -1 : 1))
    .forEach((c, i) => order.set(c.id, i))
  let engine: Engine | null = null
  const facts: Array<Record<string, unknown>> = []
  if (JRE_SIZES.has(account.size) && account.shape === 'typical') {
    engine = jreEngine(account.campaigns)
    for (const ctx of contexts) facts.push(jreFacts(ctx))
    for (let i = 0; i < EVENTS; i++) {
      const got = await jreMatch(engine, facts[i] as Record<string, unknown>, order)
      const want = set.match(contexts[i] as MatchContext).map(m => m.id)
      if (!same(got, want)) throw new Error(`${account.label}: json-rules-engine ${JSON.stringify(got)} but compiled ${JSON.stringify(want)}`)
    }
  }
  return { account, set, compileMs, matchesPerEvent: matches / EVENTS, places, engine, facts, order }
}

// ---- measurement ------------------------------------------------------------------------------

export let sink: unknown = null

async function main (): Promise<void> {
  const totalStartMs = performance.now()
  console.log(`node ${process.version}, ${cpus()[0]?.model ?? 'unknown CPU'}, ${cpus().length} logical CPUs; one core used`)
  const prepared: Prepared[] = []
  for (const account of accounts) prepared.push(await prepare(account))
  console.log(`agreement: compiled = reference on ${EVENTS} events for every account; json-rules-engine = compiled at ${[...JRE_SIZES].join(' and ')} campaigns\n`)

  const time = QUICK ? { minTime: 0.01, maxTime: 0.05 } : { minTime: 0.1, maxTime: 1.5 }
  const suite = new Suite({ reporter: false })
  for (const p of prepared) {
    const { set, account, engine, facts, order } = p
    let i = 0
    let j = 0
    let k = 0
    // Results go to `sink` so that no engine can skip work whose result is unused.
    suite.add(`${account.label}/compiled`, time, () => { sink = set.match(contexts[i++ % EVENTS] as MatchContext) })
    suite.add(`${account.label}/reference`, time, () => { sink = referenceMatch(account.campaigns, contexts[j++ % EVENTS] as MatchContext) })
    if (engine !== null) suite.add(`${account.label}/json-rules-engine`, time, async () => { sink = await jreMatch(engine, facts[k++ % EVENTS] as Record<string, unknown>, order) })
  }
  const results = await suite.run()
  const ops = new Map(results.map(r => [r.name, r.opsSec ?? 0]))
  const get = (label: string, impl: string): number | undefined => ops.get(`${label}/${impl}`)

  const fmt = (n: number | undefined): string => n === undefined ? '—' : Math.round(n).toLocaleString('en-US')
  const ratio = (a: number | undefined, b: number | undefined): string => a === undefined || b === undefined ? '—' : `${(a / b).toFixed(a / b >= 100 ? 0 : 1)}×`
  const rows = prepared.map(p => {
    const { label } = p.account
    const compiled = get(label, 'compiled')
    const reference = get(label, 'reference')
    const jre = get(label, 'json-rules-engine')
    return [label, fmt(compiled), fmt(reference), fmt(jre), ratio(compiled, reference), ratio(compiled, jre), p.matchesPerEvent.toFixed(2), p.compileMs.toFixed(0), p.places]
  })
  const header = ['campaigns', 'compiled ev/s', 'reference ev/s', 'json-rules-engine ev/s', 'compiled/reference', 'compiled/jre', 'matches/event', 'compile ms', 'index (field, path, tree)']
  const table = [header, header.map(h => '-'.repeat(Math.max(3, h.length))), ...rows]
  console.log(table.map(r => '| ' + r.join(' | ') + ' |').join('\n'))

  const c100 = get('100', 'compiled')
  const c1000 = get('1,000', 'compiled')
  const c10000 = get('10,000', 'compiled')
  const j100 = get('100', 'json-rules-engine')
  const growth = c100 !== undefined && c10000 !== undefined ? c100 / c10000 : NaN
  const check = (ok: boolean): string => ok ? 'met' : 'MISSED'
  console.log(`\ngrowth: cost(10,000) / cost(100) for compiled = ${growth.toFixed(2)}×` +
    ` (untemplated: ${c100 !== undefined ? (c100 / (get('10,000 untemplated', 'compiled') ?? NaN)).toFixed(2) : '—'}×,` +
    ` all broad: ${c100 !== undefined ? (c100 / (get('10,000 all broad', 'compiled') ?? NaN)).toFixed(1) : '—'}×)`)
  console.log('targets:')
  console.log(`  >= 1,000,000 events/s at 1,000 campaigns: ${fmt(c1000)} — ${check((c1000 ?? 0) >= 1e6)}`)
  console.log(`  >= 50x json-rules-engine at 100 campaigns: ${ratio(c100, j100)} — ${check(c100 !== undefined && j100 !== undefined && c100 / j100 >= 50)}`)
  console.log(`  cost(10,000) <= 3x cost(100): ${growth.toFixed(2)}× — ${check(growth <= 3)}`)
  console.log(`\ntotal run ${((performance.now() - totalStartMs) / 1000).toFixed(0)} s`)
}

await main()
