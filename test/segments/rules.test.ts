import { expect } from 'chai'
import { compileRule, validateSegment, type SegmentContext } from '../../src/segments/rules.js'
import { compileSegments, evaluateSegments, membershipChanges } from '../../src/segments/segment-set.js'
import { recordEvent, type WindowSpec } from '../../src/segments/windows.js'

const base = (nowMs: number, fields: Partial<SegmentContext> = {}): SegmentContext => ({
  event: {}, attributes: {}, segments: new Set(), nowMs, windows: {},
  visitor: { pageViews: 0, productViews: 0, purchases: 0, totalSpent: 0, firstSeenMs: 0, lastSeenMs: 0, viewedSkus: [], purchasedSkus: [], viewedCategories: [] },
  ...fields,
})

describe('segment rules', () => {
  it('accepts window leaves and ordinary leaves together', () => {
    expect(validateSegment({
      description: 'x', rule: {
        all: [
          { fact: 'count', event: 'productView', where: { fact: 'event.category', op: 'eq', value: 'shoes' }, within: '7d', op: 'gte', value: 3 },
          { fact: 'sum', event: 'purchase', field: 'orderTotal', op: 'gt', value: 0 },
          { not: { fact: 'segment', op: 'contains', value: 'banned' } },
        ]
      }
    })).to.deep.equal([])
    expect(validateSegment({})).to.deep.equal([])
  })

  it('reports each problem with its JSON pointer and the invalid_segment code', () => {
    const errors = validateSegment({
      extra: 1, rule: {
        any: [
          { fact: 'count', event: 'has space', op: 'between', value: 1 },
          { fact: 'sum', event: 'purchase', op: 'gte', value: 1 },
          { fact: 'count', event: 'x', where: { fact: 'attribute.plan', op: 'eq', value: 'pro' }, op: 'gte', value: 1 },
          { fact: 'attribute.plan', op: 'near', value: 1 },
        ]
      }
    })
    expect(errors.every(e => e.code === 'invalid_segment')).to.equal(true)
    expect(errors.map(e => e.field)).to.include.members(['/extra', '/rule/any/0/event', '/rule/any/0/op', '/rule/any/1/field', '/rule/any/2/where', '/rule/any/3/op'])
  })

  it('shares one window spec between rules that count the same thing', () => {
    const specs = new Map<string, WindowSpec>()
    compileRule({ fact: 'count', event: 'v', within: '1d', op: 'gte', value: 1 }, specs)
    compileRule({ fact: 'count', event: 'v', within: '1d', op: 'lt', value: 9 }, specs)
    compileRule({ fact: 'count', event: 'v', within: '2d', op: 'gte', value: 1 }, specs)
    expect(specs.size).to.equal(2)
  })

  it('evaluates computed segments over windows, attributes and segments', () => {
    const set = compileSegments(new Map([
      ['active', { rule: { fact: 'count', event: 'v', within: '1h', op: 'gte', value: 2 } }],
      ['manual', {}],
      ['pro-fans', { rule: { all: [{ fact: 'attribute.plan', op: 'eq', value: 'pro' }, { fact: 'segment', op: 'contains', value: 'fan' }] } }],
    ]), 7)
    expect(set.computed.map(c => c.name)).to.deep.equal(['active', 'pro-fans'])
    expect(set.version).to.equal(7)
    const ctx = base(0, { attributes: { plan: 'pro' }, segments: new Set(['fan']) })
    recordEvent(ctx.windows, set.specs, { ...ctx, event: { event: 'v' } })
    expect(evaluateSegments(set, ctx)).to.deep.equal(['pro-fans'])
    recordEvent(ctx.windows, set.specs, { ...ctx, event: { event: 'v' } })
    expect(evaluateSegments(set, ctx)).to.deep.equal(['active', 'pro-fans'])
    expect(evaluateSegments(set, { ...ctx, nowMs: 2 * 3_600_000 })).to.deep.equal(['pro-fans'])
  })

  it('lists entries and exits', () => {
    expect(membershipChanges(['a', 'b'], ['b', 'c'])).to.deep.equal({ entered: ['c'], exited: ['a'] })
  })
})
