import { expect } from 'chai'
import { ruleText } from '../../src/panel/rule-text.js'

describe('panel rules as sentences', () => {
  it('reads a behaviour count, an attribute and a segment', () => {
    expect(ruleText({ fact: 'count', event: 'productView', op: 'gte', value: 3, within: '7d' })).to.equal('viewed a product at least 3 times in the last 7 days')
    expect(ruleText({ fact: 'count', event: 'signup', op: 'eq', value: 1, within: '1h' })).to.equal('did signup exactly 1 time in the last hour')
    expect(ruleText({ fact: 'attribute.plan', op: 'in', value: ['pro', 'team'] })).to.equal('attribute plan is one of “pro”, “team”')
    expect(ruleText({ fact: 'segment', op: 'eq', value: 'vip' })).to.equal('is in the segment “vip”')
    expect(ruleText({ fact: 'sum', event: 'purchase', field: 'orderTotal', op: 'gt', value: 100 })).to.equal('the total orderTotal of purchase ever is more than 100')
    expect(ruleText({ fact: 'attribute.email', op: 'exists', value: true })).to.equal('attribute email is set')
  })

  it('joins groups with and / or, nested ones in parentheses', () => {
    const rule = { all: [{ fact: 'event.category', op: 'eq', value: 'shoes' }, { any: [{ fact: 'event.price', op: 'gte', value: 50 }, { not: { fact: 'segment', op: 'eq', value: 'staff' } }] }] }
    expect(ruleText(rule)).to.equal('the product category is “shoes” and (the product price is at least 50 or is not in the segment “staff”)')
    expect(ruleText({ not: { fact: 'event.path', op: 'startsWith', value: '/admin' } })).to.equal('it is not so that the page path starts with “/admin”')
    expect(ruleText({ all: [{ fact: 'time.hour', op: 'lt', value: 12 }] })).to.equal('the hour (UTC) is less than 12')
    expect(ruleText(undefined)).to.equal('no condition')
  })
})
