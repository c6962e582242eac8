import { expect } from 'chai'
import { RateLimiter, newToken, parseToken, secretMatches } from '../../src/auth/tokens.js'

describe('tokens', () => {
  it('parses what it issues and matches only the right secret', () => {
    const { id, secret, token, hash } = newToken()
    expect(parseToken(token)).to.deep.equal({ id, secret })
    expect(secretMatches(secret, hash)).to.equal(true)
    expect(secretMatches(secret + 'x', hash)).to.equal(false)
  })

  it('refuses tokens of another shape', () => {
    expect(parseToken('nope')).to.equal(null)
    expect(parseToken('bk_noseparator')).to.equal(null)
    expect(parseToken('bk_' + 'a'.repeat(300))).to.equal(null)
  })
})

describe('RateLimiter', () => {
  it('allows a burst of one second of rate, then one request per 1/rate seconds', () => {
    const limiter = new RateLimiter(10, 0)
    for (let i = 0; i < 10; i++) expect(limiter.take(0)).to.equal(0)
    expect(limiter.take(0)).to.equal(100)
    expect(limiter.take(50)).to.equal(50)
    expect(limiter.take(100)).to.equal(0)
    expect(limiter.take(100)).to.equal(100)
  })

  it('keeps to its share of the rate and burst (cluster mode), never a burst below one request', () => {
    const limiter = new RateLimiter(30, 0)
    for (let i = 0; i < 10; i++) expect(limiter.take(0, 1 / 3)).to.equal(0)
    expect(limiter.take(0, 1 / 3)).to.equal(100)
    expect(limiter.take(100, 1 / 3)).to.equal(0)
    const tiny = new RateLimiter(2, 0)
    expect(tiny.take(0, 0.1)).to.equal(0)
    expect(tiny.take(0, 0.1)).to.equal(5000)
    expect(tiny.take(5000, 0.1)).to.equal(0)
  })

  it('refills to at most one second of rate after a long pause', () => {
    const limiter = new RateLimiter(2, 0)
    limiter.take(0)
    limiter.take(0)
    expect(limiter.take(60_000)).to.equal(0)
    expect(limiter.take(60_000)).to.equal(0)
    expect(limiter.take(60_000)).to.be.above(0)
  })
})
