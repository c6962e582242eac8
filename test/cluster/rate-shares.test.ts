// Cluster mode's shares of the rate limits (src/cluster/rate-shares.ts) as a node's ownership and the
// live nodes change, and a webhook's token bucket (src/delivery/token-bucket.ts) keeping to its share.

import { expect } from 'chai'
import { RateShares } from '../../src/cluster/rate-shares.js'
import { TokenBucket } from '../../src/delivery/token-bucket.js'

describe('rate shares (cluster mode)', () => {
  it('gives a node the partitions it owns over all of them for keys, one over the live nodes for deliveries', () => {
    const node = { owned: 0, live: ['a'] }
    const shares = new RateShares({ ownedCount: () => node.owned, liveNodes: () => node.live }, 64)
    shares.update()
    // Owning nothing yet (joining): one partition's share, never zero.
    expect([shares.keys, shares.deliveries]).to.deep.equal([1 / 64, 1])
    node.owned = 22
    node.live = ['a', 'b', 'c']
    shares.update()
    expect([shares.keys, shares.deliveries]).to.deep.equal([22 / 64, 1 / 3])
    node.owned = 64
    node.live = ['a']
    shares.update()
    expect([shares.keys, shares.deliveries]).to.deep.equal([1, 1])
  })

  it('has a webhook\'s bucket start its share of the rate, following the share as it changes', () => {
    let share = 1 / 3
    const bucket = new TokenBucket(300, 0, () => share)
    // 300/s alone: 30 at once; a third of it: 10 at once, then one per 10 ms.
    let taken = 0
    while (bucket.take(0)) taken++
    expect(taken).to.equal(10)
    expect(bucket.waitMs(0)).to.equal(10)
    expect(bucket.take(10)).to.equal(true)
    share = 1
    expect(bucket.waitMs(10)).to.equal(4)
    taken = 0
    while (bucket.take(1000)) taken++
    expect(taken).to.equal(30)
  })
})
