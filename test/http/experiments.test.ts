import { expect } from 'chai'
import { admin, createTenant, identified, post, visitorId, type Tenant } from '../helpers/beacon.js'
import { assignVariant, compileExperiment, type CampaignDef } from '../../src/matching/index.js'
import { startInProcess, type InProcess } from '../helpers/in-process.js'

const DAY_MS = 86_400_000

interface Answered { id: string, content: unknown, variant?: string }

describe('experiments (in-process, manual clock)', () => {
  let node: InProcess
  let a: Tenant
  const put = (id: string, body: unknown): Promise<any> => admin(node.url, 'PUT', `/admin/accounts/${a.account}/campaigns/${id}`, body)
  const results = async (id: string, query = ''): Promise<any> => {
    const answer = await admin(node.url, 'GET', `/admin/accounts/${a.account}/campaigns/${id}/results${query}`)
    expect(answer.status, JSON.stringify(answer.body)).to.equal(200)
    return answer.body
  }
  const query = async (visitor: string, fields: Record<string, unknown> = { event: 'pageView', path: '/' }): Promise<Answered[]> => {
    const answer = await post(node.url, '/campaigns/query', { account: a.account, visitorId: visitor, platform: 'web', ...fields })
    expect(answer.status, JSON.stringify(answer.body)).to.equal(200)
    return answer.body.campaigns
  }
  const purchase = (visitor: string, orderId: string, orderTotal = 10): Promise<Answered[]> =>
    query(visitor, { event: 'purchase', orderId, orderTotal, purchasedItems: ['A1'] })

  const experiment = (over: Record<string, unknown> = {}): Record<string, unknown> => ({
    name: 'Hero test', status: 'active', priority: 1, trigger: { events: ['pageView'] }, content: { hero: 'default' },
    variants: [{ id: 'a', weight: 1, content: { hero: 'A' } }, { id: 'b', weight: 1, content: { hero: 'B' } }],
    goals: [{ event: 'purchase', metric: 'conversion', windowDays: 7 }, { event: 'purchase', metric: 'count', windowDays: 7 }, { event: 'purchase', metric: 'revenue', windowDays: 7 }],
    ...over,
  })

  beforeEach(async () => {
    node = await startInProcess(undefined, { BEACON_REPORT_FOLD_MS: '3600000' })
    a = await createTenant(node.url, 'Experiments')
  })
  afterEach(() => node.close())

  describe('configuration', () => {
    it('refuses bad variants, traffic, allocation and goals with 400 naming each field', async () => {
      const answer = await put('bad', experiment({
        variants: [{ id: 'a', weight: 0 }, { id: 'a', weight: 1, extra: 1 }, { id: 'c', weight: 1, control: true }, { id: 'd', weight: 1, control: true }],
        trafficPercent: 120, allocation: 'bandit', goals: [{ event: 'purchase', metric: 'revenue', windowDays: 0 }],
      }))
      expect(answer.status).to.equal(400)
      const fields = (answer.body.errors as Array<{ field: string }>).map(e => e.field)
      for (const field of ['/variants/0/weight', '/variants/1/extra', '/trafficPercent', '/goals/0/windowDays']) expect(fields, JSON.stringify(answer.body.errors)).to.include(field)
    })

    it('refuses duplicate variant ids, two controls, goals without variants and a bandit without a conversion goal', async () => {
      const twice = await put('bad', experiment({ variants: [{ id: 'a', weight: 1 }, { id: 'a', weight: 1 }] }))
      expect(twice.status).to.equal(400)
      expect(twice.body.errors.map((e: { field: string }) => e.field)).to.include('/variants/1/id')
      const controls = await put('bad', experiment({ variants: [{ id: 'a', weight: 1, control: true }, { id: 'b', weight: 1, control: true }] }))
      expect(controls.status).to.equal(400)
      const { variants: _v, ...plain } = experiment()
      expect((await put('bad', plain)).status).to.equal(400)
      const bandit = await put('bad', experiment({ allocation: 'bandit', goals: [{ event: 'purchase', metric: 'revenue', windowDays: 7 }] }))
      expect(bandit.status).to.equal(400)
      expect(bandit.body.errors.map((e: { field: string }) => e.field)).to.include('/allocation')
    })

    it('refuses a goal on an event type the account does not know', async () => {
      const answer = await put('bad', experiment({ goals: [{ event: 'noSuchKind', metric: 'conversion', windowDays: 7 }] }))
      expect(answer.status).to.equal(400)
      expect(answer.body.errors[0]).to.include({ code: 'unknown_event_type', field: '/goals/0/event' })
    })

    it('refuses a holdout above 50 %', async () => {
      const answer = await admin(node.url, 'PATCH', `/admin/accounts/${a.account}`, { holdoutPercent: 60 })
      expect(answer.status).to.equal(400)
    })

    it('keeps the revision while the design is unchanged and starts a new one when weights change', async () => {
      expect((await put('hero', experiment())).body).to.include({ revision: 1 })
      expect((await put('hero', experiment({ name: 'Renamed' }))).body).to.include({ revision: 1 })
      const moved = (await put('hero', experiment({ variants: [{ id: 'a', weight: 1 }, { id: 'b', weight: 3 }] }))).body
      expect(moved.revision).to.equal(2)
      expect(moved.revisionSince).to.equal(new Date(node.clock.nowMs()).toISOString())
      // A client sending the revision back cannot set it.
      expect((await put('hero', { ...experiment({ variants: [{ id: 'a', weight: 1 }, { id: 'b', weight: 3 }] }), revision: 9 })).body.revision).to.equal(2)
    })
  })

  describe('assignment', () => {
    it('answers the variant and its content, the same for a visitor every time, split by the weights', async () => {
      expect((await put('hero', experiment())).status).to.equal(200)
      const seen = new Map<string, string>()
      const counts: Record<string, number> = { a: 0, b: 0 }
      for (let i = 0; i < 100; i++) {
        const visitor = visitorId()
        const [campaign] = await query(visitor)
        expect(campaign!.variant).to.be.oneOf(['a', 'b'])
        expect(campaign!.content).to.deep.equal({ hero: campaign!.variant === 'a' ? 'A' : 'B' })
        seen.set(visitor, campaign!.variant!)
        counts[campaign!.variant!]!++
      }
      // Binomial(100, 1/2): 25 is five standard deviations below the mean.
      expect(counts.a).to.be.above(25)
      expect(counts.b).to.be.above(25)
      for (const [visitor, variant] of [...seen].slice(0, 20)) expect((await query(visitor))[0]!.variant).to.equal(variant)
      expect((await results('hero')).variants.map((v: { visitors: number }) => v.visitors)).to.deep.equal([counts.a, counts.b])
    })

    it('gives a control visitor no campaign, and counts the exposure', async () => {
      await put('hero', experiment({ variants: [{ id: 'off', weight: 1, control: true }, { id: 'on', weight: 1 }] }))
      let controls = 0
      let treated = 0
      for (let i = 0; i < 60; i++) {
        const answered = await query(visitorId())
        if (answered.length === 0) controls++
        else {
          expect(answered[0]!.variant).to.equal('on')
          expect(answered[0]!.content).to.deep.equal({ hero: 'default' })
          treated++
        }
      }
      expect(controls).to.be.above(0)
      const body = await results('hero')
      expect(body.baseline).to.equal('off')
      expect(body.variants.map((v: { visitors: number }) => v.visitors)).to.deep.equal([controls, treated])
    })

    it('answers the campaign without a variant outside trafficPercent, uncounted', async () => {
      await put('hero', experiment({ trafficPercent: 0 }))
      const [campaign] = await query(visitorId())
      expect(campaign).to.deep.equal({ id: 'hero', name: 'Hero test', priority: 1, content: { hero: 'default' } })
      expect((await results('hero')).variants.map((v: { visitors: number }) => v.visitors)).to.deep.equal([0, 0])
    })

    it("gives a person's other devices the variant their profile saw first", async () => {
      const def = experiment()
      await put('hero', def)
      const compiled = compileExperiment('hero', { ...def, revision: 1 } as unknown as CampaignDef, null)!
      const first = visitorId()
      const person = identified(a, 'ana@example.com')
      const variant = (await query(first, { event: 'pageView', path: '/', ...person }))[0]!.variant!
      // The device tells its profile its variant with its next event.
      await query(first, { event: 'pageView', path: '/', ...person })
      let second = visitorId()
      while (assignVariant(compiled, second)!.id === variant) second = visitorId()
      expect((await query(second))[0]!.variant, 'anonymous: the hash').to.not.equal(variant)
      let third = visitorId()
      while (assignVariant(compiled, third)!.id === variant) third = visitorId()
      expect((await query(third, { event: 'pageView', path: '/', ...person }))[0]!.variant, 'linked: the profile').to.equal(variant)
      expect((await query(third))[0]!.variant, 'and kept').to.equal(variant)
    })

    it('keeps a visitor in its variant across a restart and a new revision where the variant still exists', async () => {
      await put('hero', experiment())
      const visitors = Array.from({ length: 10 }, visitorId)
      const before = new Map<string, string>()
      for (const v of visitors) before.set(v, (await query(v))[0]!.variant!)
      await node.beacon.stop()
      const dataDir = node.dataDir
      node = await startInProcess(dataDir, { BEACON_REPORT_FOLD_MS: '3600000' }, node.clock)
      for (const v of visitors) expect((await query(v))[0]!.variant).to.equal(before.get(v))
      await put('hero', experiment({ variants: [{ id: 'a', weight: 9, content: { hero: 'A' } }, { id: 'b', weight: 1, content: { hero: 'B' } }] }))
      for (const v of visitors) expect((await query(v))[0]!.variant).to.equal(before.get(v))
      const second = await results('hero')
      expect(second.revision).to.equal(2)
      expect(second.variants.reduce((sum: number, v: { visitors: number }) => sum + v.visitors, 0)).to.equal(10)
      const first = await results('hero', '?revision=1')
      expect(first.variants.reduce((sum: number, v: { visitors: number }) => sum + v.visitors, 0)).to.equal(10)
      expect(second.revisions).to.deep.equal([1, 2])
    })
  })

  describe('goals and results', () => {
    it('counts a conversion once per visitor, an order once, only after exposure and inside the window', async () => {
      await put('hero', experiment())
      const early = visitorId()
      await purchase(early, 'pre-1', 50) // before any exposure: the covariate, not a conversion
      const variantOf = async (v: string): Promise<string> => (await query(v))[0]!.variant!
      const byVariant: Record<string, string[]> = { a: [], b: [] }
      byVariant[await variantOf(early)]!.push(early)
      for (let i = 0; i < 30; i++) {
        const v = visitorId()
        byVariant[await variantOf(v)]!.push(v)
      }
      const buyer = byVariant.a!.find(v => v !== early)!
      await purchase(buyer, 'o-1', 20)
      await purchase(buyer, 'o-1', 20) // the same order again: counts once
      await purchase(buyer, 'o-2', 5)
      const earlyInA = byVariant.a!.includes(early)
      if (earlyInA) await purchase(early, 'post-1', 30)
      node.clock.advance(8 * DAY_MS)
      await purchase(buyer, 'o-3', 100) // outside the 7-day window
      const body = await results('hero')
      const a = body.variants.find((v: { id: string }) => v.id === 'a')
      expect(a.visitors).to.equal(byVariant.a!.length)
      // conversions, purchases, revenue
      expect(a.goals.map((g: { total: number }) => g.total)).to.deep.equal(earlyInA ? [2, 3, 55] : [1, 2, 25])
      expect(body.comparisons).to.have.length(3)
      expect(body.comparisons[0]).to.include({ variant: 'b', goal: 0, metric: 'conversion' })
      expect(body.series).to.have.length(9)
      expect(body.warnings.map((w: { code: string }) => w.code)).to.include('too_few_visitors')
    })

    it('measures a lift with its intervals, sequential p-value and CUPED, and the sample-ratio check', async () => {
      const def = experiment({ goals: [{ event: 'purchase', metric: 'conversion', windowDays: 7 }] })
      await put('hero', def)
      // Exactly 60 visitors a variant (chosen by the assignment itself), so the outcome holds for every run.
      const compiled = compileExperiment('hero', { ...def, revision: 1 } as unknown as CampaignDef, null)!
      const chosen: Record<string, string[]> = { a: [], b: [] }
      while (chosen.a!.length < 60 || chosen.b!.length < 60) {
        const v = visitorId()
        const bucket = chosen[assignVariant(compiled, v)!.id]!
        if (bucket.length < 60) bucket.push(v)
      }
      // b converts every second visitor, a every sixth: 30 of 60 against 10 of 60.
      for (const [variant, every] of [['a', 6], ['b', 2]] as const) {
        for (const [i, v] of chosen[variant]!.entries()) {
          expect((await query(v))[0]!.variant).to.equal(variant)
          if (i % every === 0) await purchase(v, `o-${variant}-${i}`)
        }
      }
      const body = await results('hero')
      const [ra, rb] = body.variants
      expect([ra.visitors, rb.visitors, ra.goals[0].total, rb.goals[0].total]).to.deep.equal([60, 60, 10, 30])
      const lift = body.comparisons[0].lift
      expect(lift.absolute.estimate).to.be.closeTo(rb.goals[0].mean - ra.goals[0].mean, 1e-12)
      expect(lift.absolute.low).to.be.below(lift.absolute.estimate)
      expect(lift.absolute.high).to.be.above(lift.absolute.estimate)
      expect(lift.relative.estimate).to.be.closeTo(rb.goals[0].mean / ra.goals[0].mean - 1, 1e-12)
      expect(lift.pValue).to.be.below(0.01)
      expect(lift.sequential.pValue).to.be.at.least(lift.pValue)
      expect(lift.cuped.theta).to.equal(0) // nobody bought before exposure
      expect(body.sampleRatio.mismatch).to.equal(false)
    })

    it('keeps a global holdout out of every campaign and compares it with the personalized visitors', async () => {
      expect((await admin(node.url, 'PATCH', `/admin/accounts/${a.account}`, { holdoutPercent: 50 })).body.holdoutPercent).to.equal(50)
      await put('hero', experiment())
      let held = 0
      for (let i = 0; i < 40; i++) {
        const v = visitorId()
        const answered = await query(v)
        if (answered.length === 0) held++
        await query(v) // a second event: still one visitor
      }
      expect(held).to.be.within(1, 39)
      const body = await results('hero')
      expect(body.holdout.variants.map((v: { id: string, visitors: number }) => [v.id, v.visitors])).to.deep.equal([['holdout', held], ['personalized', 40 - held]])
      expect(body.variants.reduce((sum: number, v: { visitors: number }) => sum + v.visitors, 0)).to.equal(40 - held)
    })

    it('reweights a bandit toward the variant that converts, each keeping its minimum share, without a new revision', async () => {
      const variants = ['a', 'b', 'c'].map(id => ({ id, weight: 1, content: { hero: id } }))
      expect((await put('hero', experiment({ variants, allocation: 'bandit', goals: [{ event: 'purchase', metric: 'conversion', windowDays: 7 }] }))).status).to.equal(200)
      let k = 0
      for (let i = 0; i < 60; i++) {
        const v = visitorId()
        // Only c's visitors buy.
        if ((await query(v))[0]!.variant === 'c') await purchase(v, `o-${k++}`)
      }
      await node.beacon.reweightBandits()
      const body = await results('hero')
      expect(body.revision).to.equal(1)
      expect(body.allocation).to.equal('bandit')
      const weights = body.variants.map((v: { weight: number }) => v.weight)
      expect(weights[2]).to.be.above(0.85)
      expect(weights[0]).to.be.at.least(0.05 - 1e-12)
      expect(weights[1]).to.be.at.least(0.05 - 1e-12)
      let toC = 0
      for (let i = 0; i < 40; i++) if ((await query(visitorId()))[0]!.variant === 'c') toC++
      // Binomial(40, 0.9) is at least 28 with probability 0.999.
      expect(toC).to.be.at.least(28)
    })

    it('answers 400 for a campaign without variants and 404 for none', async () => {
      await put('plain', { name: 'Plain', status: 'active', priority: 1, trigger: {}, content: 1 })
      expect((await admin(node.url, 'GET', `/admin/accounts/${a.account}/campaigns/plain/results`)).status).to.equal(400)
      expect((await admin(node.url, 'GET', `/admin/accounts/${a.account}/campaigns/nope/results`)).status).to.equal(404)
      await put('hero', experiment())
      expect((await admin(node.url, 'GET', `/admin/accounts/${a.account}/campaigns/hero/results?revision=3`)).status).to.equal(400)
    })
  })
})
