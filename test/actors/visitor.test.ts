import { expect } from 'chai'
import { emptyVisitor, recordBehaviour, ORDER_IDS_MAX, VIEWED_SKUS_MAX, type EventBody } from '../../actors/visitor.js'

const base = { account: 'a', visitorId: 'v', platform: 'web' }
const ev = (fields: Partial<EventBody> & { event: string }): EventBody => ({ ...base, ...fields })

describe('visitor behaviour', () => {
  it('tracks first and last seen, counts per kind and the last platform, device and path', () => {
    const state = emptyVisitor()
    recordBehaviour(state, ev({ event: 'pageView', device: 'mobile', path: '/a' }), 1000)
    recordBehaviour(state, ev({ event: 'pageView', platform: 'ios', path: '/b' }), 2000)
    expect(state).to.include({ firstSeenMs: 1000, lastSeenMs: 2000, lastPlatform: 'ios', lastDevice: 'mobile', lastPath: '/b' })
    expect(state.counts).to.deep.equal({ pageView: 2 })
  })

  it('keeps viewed SKUs most recent first, without repeats, bounded', () => {
    const state = emptyVisitor()
    for (let i = 0; i < VIEWED_SKUS_MAX + 10; i++) recordBehaviour(state, ev({ event: 'productView', sku: `S${i}` }), i + 1)
    recordBehaviour(state, ev({ event: 'productView', sku: 'S20' }), 100)
    expect(state.viewedSkus).to.have.length(VIEWED_SKUS_MAX)
    expect(state.viewedSkus[0]).to.equal('S20')
    expect(state.viewedSkus.filter(s => s === 'S20')).to.have.length(1)
  })

  it('counts an order once however often it is reported, and sums spend', () => {
    const state = emptyVisitor()
    recordBehaviour(state, ev({ event: 'purchase', orderId: 'o1', orderTotal: 10, purchasedItems: ['A', 'B'] }), 1)
    recordBehaviour(state, ev({ event: 'purchase', orderId: 'o1', orderTotal: 10, purchasedItems: ['A', 'B'] }), 2)
    recordBehaviour(state, ev({ event: 'purchase', orderId: 'o2', orderTotal: 5.5 }), 3)
    expect(state).to.include({ purchases: 2, totalSpent: 15.5 })
    expect(state.counts).to.deep.equal({ purchase: 2 })
    expect(state.purchasedSkus).to.deep.equal(['B', 'A'])
  })

  it('remembers a bounded number of order ids', () => {
    const state = emptyVisitor()
    for (let i = 0; i < ORDER_IDS_MAX + 5; i++) recordBehaviour(state, ev({ event: 'purchase', orderId: `o${i}` }), i + 1)
    expect(state.orderIds).to.have.length(ORDER_IDS_MAX)
    expect(state.purchases).to.equal(ORDER_IDS_MAX + 5)
  })

  it('counts custom event kinds without confusing them with Object.prototype names', () => {
    const state = emptyVisitor()
    recordBehaviour(state, ev({ event: 'toString' }), 1)
    recordBehaviour(state, ev({ event: 'toString' }), 2)
    expect(state.counts.toString).to.equal(2)
  })
})
