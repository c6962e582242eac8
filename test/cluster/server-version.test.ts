import { expect } from 'chai'
import { compareAndSetIsExact, subjectPurgeIsSafe } from '../../src/cluster/server-version.js'

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

  it('purges a subject up to a sequence only where a restarted server replays it exactly (2.9.18+, nats-server issue #4196) or on a lone server', () => {
    expect(subjectPurgeIsSafe('2.9.10', true)).to.equal(false)
    expect(subjectPurgeIsSafe('2.9.17', true)).to.equal(false)
    expect(subjectPurgeIsSafe('unknown', true)).to.equal(false)
    expect(subjectPurgeIsSafe('2.9.18', true)).to.equal(true)
    expect(subjectPurgeIsSafe('2.10.0', true)).to.equal(true)
    expect(subjectPurgeIsSafe('2.9.10', false)).to.equal(true)
  })
})
