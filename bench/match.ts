// Campaign matching throughput: the compiled, indexed CampaignSet against the reference
// interpreter (every campaign's JSON walked per event) and three rule engines (json-rules-engine,
// json-logic-engine compiled, @gorules/zen-engine; bench/match-peers.ts), on generated accounts of
// 10 .. 10,000 campaigns (bench/match-data.ts describes the model).
//
//   npm run bench:match
//
// Every implementation is first checked to return the same campaigns, in the same order, for each
// of the 1,000 events (a disagreement fails the run); then bench-node measures events per second,
// cycling through the same events. The peers run at 10, 100 and 1,000 campaigns.
// MATCH_BENCH_QUICK=1 shortens every measurement (for a smoke run, not for numbers).
// MATCH_BENCH_DECISION=1 runs only the 1,000-campaign account, without peers, and the decision rows below.
//
// Experiments: the whole decision /campaigns/query makes (actors/visitor.ts matchCampaigns: match,
// caps, variant assignment) at 1,000 campaigns without variants and with 100 of them experiments, for
// visitors already exposed (the steady state: one property read per experiment matched) and for
// first visits (the hash, and the exposure recorded).

import { cpus } from 'node:os'
import { Suite } from 'bench-node'
import { compileCampaigns, validateCampaign, type CampaignInput, type MatchContext } from '../src/matching/index.js'
import { indexPlan } from '../src/matching/compile-campaigns.js'
import { referenceMatch } from '../test/matching/reference.js'
import { emptyVisitor, matchCampaigns, type EventBody, type VisitorState } from '../actors/visitor.js'
import type { Attributes } from '../actors/entity.js'
import { makeCampaigns, makeCatalog, makeContexts, mulberry32, type AccountShape } from './match-data.js'
import {
  answerOrder, flatFacts, jreMatcher, jsonLogicMatcher, nestedFacts, zenMatcher,
  type AsyncMatcher, type SyncMatcher,
} from './match-peers.js'

const QUICK = process.env.MATCH_BENCH_QUICK === '1'
/** MATCH_BENCH_ONLY=glob runs only the glob attack rows (issue 27), e.g. to compare two builds. */
const ONLY_GLOB = process.env.MATCH_BENCH_ONLY === 'glob'
const DECISION_ONLY = process.env.MATCH_BENCH_DECISION === '1'
const EVENTS = 1000
const ACCOUNT_SEED = 3
const PEER_SIZES = new Set([10, 100, 1000])

interface Account { label: string, size: number, shape: AccountShape, campaigns: CampaignInput[] }

// ---- setup and agreement checks --------------------------------------------------------------

const catalog = makeCatalog(mulberry32(1))
const contexts = makeContexts(mulberry32(2), catalog, EVENTS)
const accounts: Account[] = [
  ...[10, 100, 1000, 10_000].map(size => ({ label: size.toLocaleString('en-US'), size, shape: 'typical' as const })),
  { label: '10,000 untemplated', size: 10_000, shape: 'untemplated' as const },
  { label: '10,000 all broad', size: 10_000, shape: 'allBroad' as const },
].filter(a => !DECISION_ONLY || (a.size === 1000 && a.shape === 'typical')).map(a => ({ ...a, campaigns: makeCampaigns(ACCOUNT_SEED, catalog, a.size, a.shape) }))

const same = (a: string[], b: string[]): boolean => a.length === b.length && a.every((x, i) => x === b[i])

interface Peers {
  jre: AsyncMatcher
  jsonLogic: SyncMatcher
  zen: AsyncMatcher
  dispose: () => void
  /** Per event, the facts each peer reads, prepared outside timing. */
  flat: Array<Record<string, unknown>>
  nested: Array<Record<string, unknown>>
}

interface Prepared {
  account: Account
  set: ReturnType<typeof compileCampaigns>
  compileMs: number
  matchesPerEvent: number
  places: string
  peers: Peers | null
}

const PEER_NAMES = ['json-rules-engine', 'json-logic-engine', 'zen-engine'] as const

async function agree (account: Account, peer: string, want: string[][], match: (i: number) => string[] | Promise<string[]>): Promise<void> {
  for (let i = 0; i < EVENTS; i++) {
    const got = await match(i)
    if (!same(got, want[i] as string[])) {
      throw new Error(`${account.label}, event ${i}: ${peer} ${JSON.stringify(got)} but compiled ${JSON.stringify(want[i])}`)
    }
  }
}

async function preparePeers (account: Account, want: string[][]): Promise<Peers> {
  const order = answerOrder(account.campaigns)
  const zen = zenMatcher(account.campaigns, order)
  const peers: Peers = {
    jre: jreMatcher(account.campaigns, order),
    jsonLogic: jsonLogicMatcher(account.campaigns, order),
    zen: zen.match,
    dispose: zen.dispose,
    flat: contexts.map(flatFacts),
    nested: contexts.map(nestedFacts),
  }
  await agree(account, 'json-rules-engine', want, i => peers.jre(peers.flat[i] as Record<string, unknown>))
  await agree(account, 'json-logic-engine', want, i => peers.jsonLogic(peers.nested[i] as Record<string, unknown>))
  await agree(account, 'zen-engine', want, i => peers.zen(peers.nested[i] as Record<string, unknown>))
  return peers
}

async function prepare (account: Account): Promise<Prepared> {
  for (const { id, def } of account.campaigns) {
    const errors = validateCampaign(def)
    if (errors.length > 0) throw new Error(`generated campaign ${id} is invalid: ${JSON.stringify(errors)}`)
  }
  const startMs = performance.now()
  const set = compileCampaigns(account.campaigns)
  const compileMs = performance.now() - startMs
  const want: string[][] = []
  let matches = 0
  for (const ctx of contexts) {
    const got = set.match(ctx).map(m => m.id)
    const reference = referenceMatch(account.campaigns, ctx).map(m => m.id)
    if (!same(got, reference)) throw new Error(`${account.label}: compiled ${JSON.stringify(got)} but reference ${JSON.stringify(reference)}`)
    want.push(got)
    matches += got.length
  }
  const counts = new Map<string, number>()
  for (const { place } of indexPlan(account.campaigns)) {
    const kind = place === 'tree' || place === 'path' ? place : 'field'
    counts.set(kind, (counts.get(kind) ?? 0) + 1)
  }
  const places = ['field', 'path', 'tree'].map(k => `${k} ${counts.get(k) ?? 0}`).join(', ')
  const peers = !DECISION_ONLY && PEER_SIZES.has(account.size) && account.shape === 'typical' ? await preparePeers(account, want) : null
  return { account, set, compileMs, matchesPerEvent: matches / EVENTS, places, peers }
}

// ---- the glob attack of issue 27 ------------------------------------------------------------------

/**
 * Milliseconds per event for 10 campaigns of 100 trigger paths each, every path `*` + 253 × `a` +
 * `?b` (the attack) or `*` + 252 × `a` + `?b*` (a middle piece with `?`, searched), against a
 * pageView of a 2,048-character path of `a`: the mean of as many events as fit in about a second.
 */
function globAttack (): void {
  const shapes = [
    { label: '`*` + 253 a + `?b` (issue 27)', path: (i: number) => '*' + 'a'.repeat(253 - String(i).length) + String(i) + '?b' },
    { label: '`*` + 252 a + `?b*`', path: (i: number) => '*' + 'a'.repeat(252 - String(i).length) + String(i) + '?b*' },
  ]
  const ctx = { ...contexts[0] as MatchContext, event: { event: 'pageView', platform: 'web', path: 'a'.repeat(2048) } }
  console.log('\nglob attack (10 campaigns × 100 trigger paths, a 2,048-character path):')
  console.log('| trigger paths | ms per event |\n| --- | ---: |')
  for (const shape of shapes) {
    const set = compileCampaigns(Array.from({ length: 10 }, (_, c) => ({
      id: `attack-${c}`,
      def: { name: `attack ${c}`, status: 'active' as const, priority: 1, trigger: { events: ['pageView'], paths: Array.from({ length: 100 }, (_, i) => shape.path(i)) }, content: {} },
    })))
    let n = 0
    const startMs = performance.now()
    while (performance.now() - startMs < (QUICK ? 100 : 1000) || n < 3) { sink = set.match(ctx); n++ }
    console.log(`| ${shape.label} | ${((performance.now() - startMs) / n).toFixed(3)} |`)
  }
}

// ---- experiments: the decision with and without variants -------------------------------------

const NO_SEGMENTS: readonly string[] = []

interface DecisionCase {
  label: string
  set: ReturnType<typeof compileCampaigns>
  events: EventBody[]
  /** The visitor state of the event at index i. */
  states: (i: number) => VisitorState
}

/** Every tenth campaign of the account made an experiment of two variants. */
function withExperiments (campaigns: readonly CampaignInput[]): CampaignInput[] {
  return campaigns.map((c, i) => i % 10 !== 0
    ? c
    : { id: c.id, def: { ...c.def, variants: [{ id: 'a', weight: 1 }, { id: 'b', weight: 1, content: { variant: 'b' } }], goals: [{ event: 'purchase', metric: 'conversion', windowDays: 7 }], revision: 1 } })
}

function decisionCases (account: Account): DecisionCase[] {
  const events = contexts.map((ctx, i) => ({ ...ctx.event, account: 'bench', visitorId: `00000000-0000-4000-8000-${i.toString(16).padStart(12, '0')}` }) as EventBody)
  const experiments = withExperiments(account.campaigns)
  const steady = contexts.map(() => emptyVisitor())
  const plain = contexts.map(() => emptyVisitor())
  const set = compileCampaigns(experiments)
  // One pass first: every visitor exposed, as after its first visit.
  contexts.forEach((ctx, i) => matchCampaigns(set, events[i]!, steady[i]!, ctx.attributes as Attributes, NO_SEGMENTS, ctx.nowMs, null, 'bench', events[i]!.visitorId))
  return [
    { label: 'no variants', set: compileCampaigns(account.campaigns), events, states: i => plain[i]! },
    { label: '100 experiments, exposed', set, events, states: i => steady[i]! },
    // A fresh state per call: every experiment matched is a first exposure (hash, record).
    { label: '100 experiments, first visit', set, events, states: () => emptyVisitor() },
  ]
}

// ---- measurement ------------------------------------------------------------------------------

export let sink: unknown = null

async function main (): Promise<void> {
  const totalStartMs = performance.now()
  console.log(`node ${process.version}, ${cpus()[0]?.model ?? 'unknown CPU'}, ${cpus().length} logical CPUs; one core used`)
  if (ONLY_GLOB) return globAttack()
  const prepared: Prepared[] = []
  for (const account of accounts) prepared.push(await prepare(account))
  console.log(`agreement: compiled = reference on ${EVENTS} events for every account; ${PEER_NAMES.join(', ')} = compiled ` +
    `on ${EVENTS} events at ${[...PEER_SIZES].map(n => n.toLocaleString('en-US')).join(', ')} campaigns\n`)

  const time = QUICK ? { minTime: 0.01, maxTime: 0.05 } : { minTime: 0.1, maxTime: 1.5 }
  const suite = new Suite({ reporter: false })
  for (const { set, account, peers } of prepared) {
    let i = 0
    let j = 0
    // Results go to `sink` so that no engine can skip work whose result is unused.
    suite.add(`${account.label}/compiled`, time, () => { sink = set.match(contexts[i++ % EVENTS] as MatchContext) })
    suite.add(`${account.label}/reference`, time, () => { sink = referenceMatch(account.campaigns, contexts[j++ % EVENTS] as MatchContext) })
    if (peers === null) continue
    let k = 0
    let l = 0
    let m = 0
    suite.add(`${account.label}/json-rules-engine`, time, async () => { sink = await peers.jre(peers.flat[k++ % EVENTS] as Record<string, unknown>) })
    suite.add(`${account.label}/json-logic-engine`, time, () => { sink = peers.jsonLogic(peers.nested[l++ % EVENTS] as Record<string, unknown>) })
    suite.add(`${account.label}/zen-engine`, time, async () => { sink = await peers.zen(peers.nested[m++ % EVENTS] as Record<string, unknown>) })
  }
  const decision = decisionCases(accounts.find(a => a.size === 1000 && a.shape === 'typical')!)
  for (const c of decision) {
    let n = 0
    suite.add(`decision/${c.label}`, time, () => {
      const at = n++ % EVENTS
      const ctx = contexts[at] as MatchContext
      sink = matchCampaigns(c.set, c.events[at]!, c.states(at), ctx.attributes as Attributes, NO_SEGMENTS, ctx.nowMs, null, 'bench', c.events[at]!.visitorId)
    })
  }
  const results = await suite.run()
  for (const { peers } of prepared) peers?.dispose()
  const ops = new Map(results.map(r => [r.name, r.opsSec ?? 0]))
  const get = (label: string, impl: string): number | undefined => ops.get(`${label}/${impl}`)

  const fmt = (n: number | undefined): string => n === undefined ? '—' : Math.round(n).toLocaleString('en-US')
  const ratio = (a: number | undefined, b: number | undefined): string => a === undefined || b === undefined ? '—' : `${(a / b).toFixed(a / b >= 100 ? 0 : 1)}×`
  const print = (header: string[], rows: string[][]): void => {
    const table = [header, header.map(h => '-'.repeat(Math.max(3, h.length))), ...rows]
    console.log(table.map(r => '| ' + r.join(' | ') + ' |').join('\n'))
  }
  print(['campaigns', 'compiled ev/s', 'reference ev/s', 'compiled/reference', 'matches/event', 'compile ms', 'index (field, path, tree)'],
    prepared.map(p => {
      const { label } = p.account
      const compiled = get(label, 'compiled')
      const reference = get(label, 'reference')
      return [label, fmt(compiled), fmt(reference), ratio(compiled, reference), p.matchesPerEvent.toFixed(2), p.compileMs.toFixed(0), p.places]
    }))
  console.log('\npeers (events/s, and compiled/peer measured in this run):')
  print(['campaigns', 'compiled', ...PEER_NAMES, ...PEER_NAMES.map(n => `compiled/${n}`)],
    prepared.filter(p => p.peers !== null).map(p => {
      const { label } = p.account
      const compiled = get(label, 'compiled')
      return [label, fmt(compiled), ...PEER_NAMES.map(n => fmt(get(label, n))), ...PEER_NAMES.map(n => ratio(compiled, get(label, n)))]
    }))

  console.log('\nthe decision of /campaigns/query (match, caps, assignment) at 1,000 campaigns (events/s):')
  const plain = ops.get('decision/no variants')
  print(['campaigns', 'events/s', 'against no variants'], decision.map(c => [c.label, fmt(ops.get(`decision/${c.label}`)), ratio(ops.get(`decision/${c.label}`), plain)]))

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
  globAttack()
  console.log(`\ntotal run ${((performance.now() - totalStartMs) / 1000).toFixed(0)} s`)
}

await main()
