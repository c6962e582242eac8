import { expect } from 'chai'
import { assignVariant, bucketOf, compileCampaigns, compileExperiment, inHoldout, seedOf, validateCampaign, type CampaignDef } from '../../src/matching/index.js'

function def (over: Partial<CampaignDef> = {}): CampaignDef {
  return {
    name: 'c', status: 'active', priority: 0, trigger: {}, content: { v: 'default' },
    variants: [{ id: 'a', weight: 1 }, { id: 'b', weight: 3, content: { v: 'b' } }],
    ...over,
  }
}

function ids (n: number): string[] {
  return Array.from({ length: n }, (_, i) => `00000000-0000-4000-8000-${i.toString(16).padStart(12, '0')}`)
}

describe('experiments: compiling and assignment', () => {
  it('splits visitors by the weights', () => {
    const experiment = compileExperiment('hero', def(), { v: 'default' })!
    const counts = { a: 0, b: 0 }
    for (const id of ids(20_000)) counts[assignVariant(experiment, id)!.id as 'a' | 'b']++
    // Binomial(20,000, 1/4): standard deviation 61; ±300 is about five.
    expect(counts.a).to.be.closeTo(5_000, 300)
  })

  it('is deterministic and depends on the campaign and the salt', () => {
    const one = compileExperiment('hero', def(), null)!
    const again = compileExperiment('hero', def(), null)!
    const other = compileExperiment('other', def(), null)!
    const salted = compileExperiment('hero', def({ salt: 'x' }), null)!
    let sameCampaign = 0
    let otherCampaign = 0
    let otherSalt = 0
    for (const id of ids(1_000)) {
      const v = assignVariant(one, id)!.id
      if (assignVariant(again, id)!.id === v) sameCampaign++
      if (assignVariant(other, id)!.id === v) otherCampaign++
      if (assignVariant(salted, id)!.id === v) otherSalt++
    }
    expect(sameCampaign).to.equal(1_000)
    // Independent draws agree with probability 1/16 + 9/16 = 0.625.
    expect(otherCampaign).to.be.within(550, 700)
    expect(otherSalt).to.be.within(550, 700)
  })

  it('keeps everyone already in where they were when trafficPercent grows', () => {
    const small = compileExperiment('hero', def({ trafficPercent: 20 }), null)!
    const large = compileExperiment('hero', def({ trafficPercent: 60 }), null)!
    let inSmall = 0
    let inLarge = 0
    for (const id of ids(5_000)) {
      const before = assignVariant(small, id)
      const after = assignVariant(large, id)
      if (after !== null) inLarge++
      if (before === null) continue
      inSmall++
      expect(after?.id).to.equal(before.id)
    }
    expect(inSmall).to.be.closeTo(1_000, 150)
    expect(inLarge).to.be.closeTo(3_000, 200)
  })

  it('gives each variant its content, or the campaign\'s, frozen', () => {
    const set = compileCampaigns([{ id: 'hero', def: def() }])
    const experiment = set.experiment('hero')!
    expect(experiment.variants.map(v => v.content)).to.deep.equal([{ v: 'default' }, { v: 'b' }])
    expect(Object.isFrozen(experiment.variants[1]!.content)).to.equal(true)
    expect(set.experiment('none')).to.equal(undefined)
  })

  it('compiles the experiments of paused campaigns too (their goals still count), without matching them', () => {
    const set = compileCampaigns([{ id: 'hero', def: def({ status: 'paused' }) }])
    expect(set.size).to.equal(0)
    expect(set.experiment('hero')?.revision).to.equal(1)
  })

  it('holds out about the given share, stably', () => {
    const seed = seedOf('account', '$holdout')
    const held = ids(10_000).filter(id => inHoldout(seed, 10, id)).length
    expect(held).to.be.closeTo(1_000, 150)
    expect(inHoldout(seed, 0, ids(1)[0]!)).to.equal(false)
    expect(bucketOf(seed, 'x')).to.equal(bucketOf(seed, 'x'))
  })

  it('validates variants, traffic, goals and allocation', () => {
    expect(validateCampaign(def({ goals: [{ event: 'purchase', metric: 'conversion', windowDays: 7 }], trafficPercent: 50, allocation: 'bandit' }))).to.deep.equal([])
    const fields = (body: unknown): string[] => validateCampaign(body).map(e => e.field!)
    expect(fields(def({ variants: [{ id: 'a', weight: 1 }] }))).to.deep.equal(['/variants'])
    expect(fields(def({ variants: [{ id: 'a b', weight: 1 }, { id: 'c', weight: -1 }] }))).to.deep.equal(['/variants/0/id', '/variants/1/weight'])
    expect(fields(def({ trafficPercent: -1 }))).to.deep.equal(['/trafficPercent'])
    const { variants: _variants, ...plain } = def()
    expect(fields({ ...plain, goals: [{ event: 'purchase', metric: 'conversion', windowDays: 7 }] })).to.include('/goals')
    expect(fields(def({ goals: [{ event: 'purchase', metric: 'sum' as 'count', windowDays: 91 }] }))).to.deep.equal(['/goals/0/metric', '/goals/0/windowDays'])
    expect(fields(def({ allocation: 'bandit' }))).to.deep.equal(['/allocation'])
  })
})
