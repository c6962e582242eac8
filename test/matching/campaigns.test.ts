import { expect } from 'chai'
import {
  compileCampaigns, validateCampaign,
  type CampaignDef, type CampaignInput, type MatchContext,
} from '../../src/matching/index.js'
import { compileCampaignsSliced, indexPlan, STEP_CAMPAIGNS } from '../../src/matching/compile-campaigns.js'
import { referenceMatch } from './reference.js'

const NOW_MS = Date.UTC(2025, 5, 3, 12)

function def (over: Partial<CampaignDef> = {}): CampaignDef {
  return { name: 'c', status: 'active', priority: 0, trigger: {}, content: { html: '<b>hi</b>' }, ...over }
}

function ctx (event: Record<string, unknown> = {}, over: Partial<MatchContext> = {}): MatchContext {
  return {
    event: { event: 'productView', platform: 'web', device: 'mobile', path: '/shoes/red', ...event },
    attributes: { plan: 'pro' },
    segments: new Set(['eu']),
    visitor: { pageViews: 1, productViews: 1, purchases: 0, totalSpent: 0, firstSeenMs: NOW_MS, lastSeenMs: NOW_MS, viewedSkus: [], purchasedSkus: [], viewedCategories: [] },
    nowMs: NOW_MS,
    ...over,
  }
}

// Matches with the compiled set and checks the reference interpreter returns the same ids.
function matchIds (campaigns: CampaignInput[], c: MatchContext): string[] {
  for (const { def } of campaigns) expect(validateCampaign(def), 'fixture must be valid').to.deep.equal([])
  const compiled = compileCampaigns(campaigns).match(c).map(m => m.id)
  expect(referenceMatch(campaigns, c).map(m => m.id), 'reference interpreter disagrees').to.deep.equal(compiled)
  return compiled
}

const one = (d: CampaignDef, c: MatchContext): boolean => matchIds([{ id: 'x', def: d }], c).length === 1

describe('campaigns: triggers', () => {
  it('matches every event when the trigger is empty', () => {
    expect(one(def(), ctx())).to.equal(true)
    expect(one(def(), ctx({ event: 'anything', platform: undefined, device: undefined, path: undefined }))).to.equal(true)
  })

  it('restricts by event kind', () => {
    const d = def({ trigger: { events: ['productView', 'addToCart'] } })
    expect(one(d, ctx())).to.equal(true)
    expect(one(d, ctx({ event: 'addToCart' }))).to.equal(true)
    expect(one(d, ctx({ event: 'pageView' }))).to.equal(false)
    expect(one(d, ctx({ event: undefined }))).to.equal(false)
  })

  it('restricts by platform', () => {
    const d = def({ trigger: { platforms: ['ios'] } })
    expect(one(d, ctx({ platform: 'ios' }))).to.equal(true)
    expect(one(d, ctx({ platform: 'web' }))).to.equal(false)
    expect(one(d, ctx({ platform: undefined }))).to.equal(false)
  })

  it('restricts by device', () => {
    const d = def({ trigger: { devices: ['desktop', 'tablet'] } })
    expect(one(d, ctx({ device: 'tablet' }))).to.equal(true)
    expect(one(d, ctx({ device: 'mobile' }))).to.equal(false)
  })

  it('restricts by path globs, any of which may match', () => {
    const d = def({ trigger: { paths: ['/shoes/*', '/sale'] } })
    expect(one(d, ctx({ path: '/shoes/red' }))).to.equal(true)
    expect(one(d, ctx({ path: '/sale' }))).to.equal(true)
    expect(one(d, ctx({ path: '/sale/x' }))).to.equal(false)
    expect(one(d, ctx({ path: '/hats/red' }))).to.equal(false)
    expect(one(d, ctx({ path: undefined }))).to.equal(false)
    expect(one(d, ctx({ path: 42 }))).to.equal(false)
  })

  it('restricts by paths that have no literal directory to index under', () => {
    const d = def({ trigger: { paths: ['*.html', '/?'] } })
    expect(one(d, ctx({ path: '/x/y.html' }))).to.equal(true)
    expect(one(d, ctx({ path: '/a' }))).to.equal(true)
    expect(one(d, ctx({ path: '/ab' }))).to.equal(false)
  })

  it('needs every restricted dimension to match', () => {
    const d = def({ trigger: { events: ['productView'], platforms: ['web'], devices: ['mobile'], paths: ['/shoes/*'] } })
    expect(one(d, ctx())).to.equal(true)
    expect(one(d, ctx({ event: 'pageView' }))).to.equal(false)
    expect(one(d, ctx({ platform: 'ios' }))).to.equal(false)
    expect(one(d, ctx({ device: 'desktop' }))).to.equal(false)
    expect(one(d, ctx({ path: '/hats/x' }))).to.equal(false)
  })

  it('does not confuse a non-string event kind with a listed one', () => {
    const d = def({ trigger: { events: ['1'] } })
    expect(one(d, ctx({ event: 1 }))).to.equal(false)
  })

  it('treats "*" in a trigger list as a literal value, not a wildcard', () => {
    const d = def({ trigger: { events: ['*'] } })
    expect(one(d, ctx({ event: '*' }))).to.equal(true)
    expect(one(d, ctx({ event: 'productView' }))).to.equal(false)
  })

  it('handles a trigger listing more combinations than the tree files', () => {
    const many = (p: string): string[] => Array.from({ length: 20 }, (_, i) => p + String(i))
    const d = def({ trigger: { events: many('e'), platforms: many('p'), devices: many('d') } })
    expect(one(d, ctx({ event: 'e7', platform: 'p19', device: 'd0' }))).to.equal(true)
    expect(one(d, ctx({ event: 'e7', platform: 'p20', device: 'd0' }))).to.equal(false)
    expect(one(d, ctx({ event: 'e7', platform: 'p19', device: 'dx' }))).to.equal(false)
  })
})

describe('campaigns: index keys', () => {
  // Campaigns that never match but name many skus, kinds and paths: they make keys selective,
  // so the campaigns under test are filed under their keys (checked with indexPlan).
  const fillers = Array.from({ length: 10 }, (_, i) => ({
    id: `filler${i}`,
    def: def({ trigger: { events: [`never${i}`], paths: [`/never/${i}/*`] }, rule: { fact: 'event.sku', op: 'eq', value: `F${i}` } }),
  }))

  function placed (campaigns: CampaignInput[]): Record<string, string> {
    return Object.fromEntries(indexPlan(campaigns).filter(p => !p.id.startsWith('filler')).map(p => [p.id, p.place]))
  }

  it('finds a campaign filed under a required event field value', () => {
    const campaigns = [
      ...fillers,
      { id: 'sku', def: def({ rule: { all: [{ fact: 'event.sku', op: 'in', value: ['A1', 'B2', 'A1'] }, { fact: 'attribute.plan', op: 'eq', value: 'pro' }] } }) },
      { id: 'other', def: def({ rule: { all: [{ fact: 'event.sku', op: 'eq', value: 'C3' }, { fact: 'attribute.plan', op: 'eq', value: 'pro' }] } }) },
    ]
    expect(placed(campaigns)).to.deep.equal({ sku: 'event.sku', other: 'event.sku' })
    expect(matchIds(campaigns, ctx({ sku: 'B2' }))).to.deep.equal(['sku'])
    expect(matchIds(campaigns, ctx({ sku: 'B2' }, { attributes: {} }))).to.deep.equal([])
    expect(matchIds(campaigns, ctx({ sku: 'C3' }))).to.deep.equal(['other'])
    expect(matchIds(campaigns, ctx({ sku: 'Z' }))).to.deep.equal([])
    expect(matchIds(campaigns, ctx({}))).to.deep.equal([])
    expect(matchIds(campaigns, ctx({ sku: null }))).to.deep.equal([])
    expect(matchIds(campaigns, ctx({ sku: ['A1'] }))).to.deep.equal([])
  })

  it('still checks the trigger and schedule of a campaign filed under a field', () => {
    const campaigns = [...fillers, { id: 'k', def: def({ trigger: { platforms: ['web', 'ios'], devices: ['desktop', 'tablet'], paths: ['/shoes/*'] }, endsAt: '2030-01-01', rule: { fact: 'event.sku', op: 'eq', value: 'A1' } }) }]
    expect(placed(campaigns)).to.deep.equal({ k: 'event.sku' })
    expect(matchIds(campaigns, ctx({ sku: 'A1' }))).to.deep.equal([])
    expect(matchIds(campaigns, ctx({ sku: 'A1', device: 'desktop' }))).to.deep.equal(['k'])
    expect(matchIds(campaigns, ctx({ sku: 'A1', device: 'desktop', platform: 'android' }))).to.deep.equal([])
    expect(matchIds(campaigns, ctx({ sku: 'A1', device: 'desktop', path: '/hats/x' }))).to.deep.equal([])
    expect(matchIds(campaigns, ctx({ sku: 'A1', device: 'desktop' }, { nowMs: Date.UTC(2030, 0, 1) }))).to.deep.equal([])
  })

  it('finds a campaign filed under an attribute value', () => {
    const campaigns = [...fillers, { id: 'gold', def: def({ rule: { all: [{ fact: 'attribute.tier', op: 'eq', value: 3 }] } }) }]
    expect(placed(campaigns)).to.deep.equal({ gold: 'attribute.tier' })
    expect(matchIds(campaigns, ctx({}, { attributes: { tier: 3 } }))).to.deep.equal(['gold'])
    expect(matchIds(campaigns, ctx({}, { attributes: { tier: '3' } }))).to.deep.equal([])
  })

  it('files under the key with the most distinct values, which narrows candidates most', () => {
    const campaigns = [
      ...fillers,
      ...['a', 'b', 'c'].map(id => ({ id, def: def({ rule: { all: [{ fact: 'attribute.plan', op: 'eq', value: 'pro' }, { fact: 'event.brand', op: 'eq', value: id }] } }) })),
    ]
    expect(placed(campaigns)).to.deep.equal({ a: 'event.brand', b: 'event.brand', c: 'event.brand' })
    expect(matchIds(campaigns, ctx({ brand: 'b' }))).to.deep.equal(['b'])
  })

  it('keeps a campaign in the trigger tree when its trigger is more selective than its key', () => {
    const campaigns = Array.from({ length: 10 }, (_, i) => ({ id: `k${i}`, def: def({ trigger: { events: [`e${i}`] }, rule: { fact: 'attribute.plan', op: 'eq', value: 'pro' } }) }))
    expect(new Set(Object.values(placed(campaigns)))).to.deep.equal(new Set(['tree']))
    expect(matchIds(campaigns, ctx({ event: 'e3' }))).to.deep.equal(['k3'])
  })

  it('does not file under a field that only one branch of any requires', () => {
    const campaigns = [...fillers, { id: 'either', def: def({ rule: { any: [{ fact: 'event.sku', op: 'eq', value: 'A1' }, { fact: 'event.brand', op: 'eq', value: 'Acme' }] } }) }]
    expect(placed(campaigns)).to.deep.equal({ either: 'tree' })
    expect(matchIds(campaigns, ctx({ brand: 'Acme' }))).to.deep.equal(['either'])
    expect(matchIds(campaigns, ctx({ sku: 'A1' }))).to.deep.equal(['either'])
  })

  it('files under a field required inside nested all and single-branch any', () => {
    const campaigns = [...fillers, { id: 'n', def: def({ rule: { all: [{ any: [{ all: [{ fact: 'event.sku', op: 'eq', value: 'A1' }] }] }, { not: { fact: 'event.brand', op: 'eq', value: 'x' } }] } }) }]
    expect(placed(campaigns)).to.deep.equal({ n: 'event.sku' })
    expect(matchIds(campaigns, ctx({ sku: 'A1' }))).to.deep.equal(['n'])
    expect(matchIds(campaigns, ctx({ sku: 'A1', brand: 'x' }))).to.deep.equal([])
  })

  it('finds campaigns filed under exact paths and directory prefixes, once each', () => {
    const campaigns = [
      ...fillers,
      { id: 'exact', def: def({ trigger: { paths: ['/shoes/red', '/hats'] } }) },
      { id: 'nested', def: def({ trigger: { paths: ['/shoes/*', '/shoes/red/*', '/shoes/red', '/shoes/*/x'] } }) },
      { id: 'deep', def: def({ trigger: { paths: ['/shoes/red/*'] } }) },
      { id: 'star', def: def({ trigger: { paths: ['/sho*'] } }) },
      { id: 'mark', def: def({ trigger: { paths: ['/shoes/re?'] } }) },
    ]
    expect(placed(campaigns)).to.deep.equal({ exact: 'path', nested: 'path', deep: 'path', star: 'tree', mark: 'path' })
    expect(matchIds(campaigns, ctx({ path: '/shoes/red' }))).to.deep.equal(['exact', 'mark', 'nested', 'star'])
    expect(matchIds(campaigns, ctx({ path: '/shoes/red/42' }))).to.deep.equal(['deep', 'nested', 'star'])
    expect(matchIds(campaigns, ctx({ path: '/shoes/blue/x' }))).to.deep.equal(['nested', 'star'])
    expect(matchIds(campaigns, ctx({ path: '/hats' }))).to.deep.equal(['exact'])
    expect(matchIds(campaigns, ctx({ path: 'shoes' }))).to.deep.equal([])
  })
})

describe('campaigns: schedule', () => {
  const d = def({ startsAt: '2025-06-01T00:00:00Z', endsAt: '2025-06-02T00:00:00Z' })
  const startMs = Date.UTC(2025, 5, 1)
  const endMs = Date.UTC(2025, 5, 2)

  it('includes the exact start instant', () => {
    expect(one(d, ctx({}, { nowMs: startMs }))).to.equal(true)
    expect(one(d, ctx({}, { nowMs: startMs - 1 }))).to.equal(false)
  })

  it('excludes the exact end instant', () => {
    expect(one(d, ctx({}, { nowMs: endMs - 1 }))).to.equal(true)
    expect(one(d, ctx({}, { nowMs: endMs }))).to.equal(false)
  })

  it('honours a start alone and an end alone', () => {
    expect(one(def({ startsAt: '2025-06-01T00:00:00Z' }), ctx({}, { nowMs: startMs + 1e12 }))).to.equal(true)
    expect(one(def({ endsAt: '2025-06-02T00:00:00Z' }), ctx({}, { nowMs: 0 }))).to.equal(true)
    expect(one(def({ endsAt: '2025-06-02T00:00:00Z' }), ctx({}, { nowMs: endMs }))).to.equal(false)
  })

  it('reads zone offsets', () => {
    const offset = def({ startsAt: '2025-06-01T02:00:00+02:00' })
    expect(one(offset, ctx({}, { nowMs: startMs }))).to.equal(true)
    expect(one(offset, ctx({}, { nowMs: startMs - 1 }))).to.equal(false)
  })

  it('checks the schedule against nowMs at match time, not at compile time', () => {
    const set = compileCampaigns([{ id: 'x', def: d }])
    expect(set.match(ctx({}, { nowMs: startMs - 1 }))).to.have.length(0)
    expect(set.match(ctx({}, { nowMs: startMs }))).to.have.length(1)
    expect(set.match(ctx({}, { nowMs: endMs }))).to.have.length(0)
  })
})

describe('campaigns: status, order and results', () => {
  it('leaves paused campaigns out of the index', () => {
    const set = compileCampaigns([{ id: 'a', def: def({ status: 'paused' }) }, { id: 'b', def: def() }])
    expect(set.size).to.equal(1)
    expect(matchIds([{ id: 'a', def: def({ status: 'paused' }) }], ctx())).to.deep.equal([])
  })

  it('orders by priority, highest first, then by id ascending', () => {
    const campaigns = [
      { id: 'b', def: def({ priority: 5 }) },
      { id: 'c', def: def({ priority: 10 }) },
      { id: 'a', def: def({ priority: 5 }) },
      { id: 'B', def: def({ priority: 5 }) },
      { id: 'z', def: def({ priority: -3 }) },
      { id: 'k', def: def({ priority: 5, rule: { fact: 'event.sku', op: 'eq', value: 'A1' } }) },
      { id: 'p', def: def({ priority: 7, trigger: { paths: ['/shoes/*'] } }) },
      { id: 'e', def: def({ priority: 5, trigger: { events: ['productView'] } }) },
    ]
    expect(matchIds(campaigns, ctx({ sku: 'A1' }))).to.deep.equal(['c', 'p', 'B', 'a', 'b', 'e', 'k', 'z'])
  })

  it('orders many simultaneous matches the same way', () => {
    const campaigns = Array.from({ length: 120 }, (_, i) => ({ id: `m${(i * 37) % 120}`, def: def({ priority: (i * 7) % 5 }) }))
    const ids = matchIds(campaigns, ctx())
    const priority = new Map(campaigns.map(c => [c.id, c.def.priority]))
    const expected = [...ids].sort((a, b) => (priority.get(b) ?? 0) - (priority.get(a) ?? 0) || (a < b ? -1 : 1))
    expect(ids).to.have.length(120)
    expect(ids).to.deep.equal(expected)
  })

  it('returns id, name, priority, content, cap and experiment (null without variants)', () => {
    const set = compileCampaigns([{ id: 'x', def: def({ name: 'Summer', priority: 3, frequencyCap: { max: 2, per: 'day' }, content: { a: [1] } }) }, { id: 'y', def: def() }])
    const [x, y] = set.match(ctx())
    expect(x).to.deep.equal({ id: 'x', name: 'Summer', priority: 3, content: { a: [1] }, cap: { max: 2, per: 'day' }, experiment: null })
    expect(y?.cap).to.equal(null)
  })

  it('freezes shared content and does not freeze the definition it was given', () => {
    const content = { list: [{ x: 1 }] }
    const set = compileCampaigns([{ id: 'x', def: def({ content }) }])
    const got = set.match(ctx())[0]?.content as { list: Array<{ x: number }> }
    expect(Object.isFrozen(got)).to.equal(true)
    expect(Object.isFrozen(got.list[0])).to.equal(true)
    expect(Object.isFrozen(content)).to.equal(false)
    expect(() => { (got.list[0] as { x: number }).x = 2 }).to.throw(TypeError)
  })

  it('returns a fresh array each time, so callers may filter it in place', () => {
    const set = compileCampaigns([{ id: 'x', def: def() }])
    const first = set.match(ctx())
    first.length = 0
    expect(set.match(ctx())).to.have.length(1)
    expect(set.match(ctx())).to.not.equal(set.match(ctx()))
  })

  it('is frozen', () => {
    const set = compileCampaigns([])
    expect(Object.isFrozen(set)).to.equal(true)
    expect(set.match(ctx())).to.deep.equal([])
  })

  it('evaluates the rule against the whole context', () => {
    const campaigns = [{ id: 'r', def: def({ rule: { all: [{ fact: 'segment', op: 'contains', value: 'eu' }, { fact: 'visitor.purchases', op: 'eq', value: 0 }] } }) }]
    expect(matchIds(campaigns, ctx())).to.deep.equal(['r'])
    expect(matchIds(campaigns, ctx({}, { segments: new Set() }))).to.deep.equal([])
  })
})

describe('campaigns: a build in slices', () => {
  const many = (n: number): CampaignInput[] => Array.from({ length: n }, (_, i) => ({ id: `c${i}`, def: def({ trigger: { events: ['productView'] } }) }))

  it('builds an account of at most STEP_CAMPAIGNS campaigns before it returns, whatever its slices measure (a change in effect when answered)', () => {
    let built: string[] | null = null
    // A slice of 0 ms: what a process paused in its first slice (a loaded machine) measures.
    compileCampaignsSliced(many(STEP_CAMPAIGNS), 0, set => { built = set.match(ctx()).map(m => m.id) })
    expect(built).to.have.length(STEP_CAMPAIGNS)
  })

  it('builds a larger account in slices, the event loop running in between, to the same set', async () => {
    let built: string[] | null = null
    const done = new Promise<void>(resolve => compileCampaignsSliced(many(STEP_CAMPAIGNS * 3), 0, set => { built = set.match(ctx()).map(m => m.id); resolve() }))
    expect(built, 'not built before the event loop ran').to.equal(null)
    await done
    expect(built).to.deep.equal(compileCampaigns(many(STEP_CAMPAIGNS * 3)).match(ctx()).map(m => m.id))
  })
})
