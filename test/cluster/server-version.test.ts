import { expect } from 'chai'
import { compareAndSetIsExact } from '../../src/cluster/server-version.js'

describe('cluster: which nats-server makes a replicated compare-and-set exact', () => {
  it('trusts any server on one replica', () => {
    expect(compareAndSetIsExact('2.9.10', 1)).to.equal(true)
    expect(compareAndSetIsExact('unknown', 1)).to.equal(true)
  })

  it('trusts replicated streams from 2.9.21 on (nats-server issue #4320), not before', () => {
    expect(compareAndSetIsExact('2.9.10', 3)).to.equal(false)
    expect(compareAndSetIsExact('2.9.20', 3)).to.equal(false)
    expect(compareAndSetIsExact('2.8.4', 3)).to.equal(false)
    expect(compareAndSetIsExact('2.9.21', 3)).to.equal(true)
    expect(compareAndSetIsExact('2.10.0', 3)).to.equal(true)
    expect(compareAndSetIsExact('v2.12.1-beta.2', 3)).to.equal(true)
    expect(compareAndSetIsExact('3.0.0', 3)).to.equal(true)
    expect(compareAndSetIsExact('unknown', 3)).to.equal(false)
  })
})
