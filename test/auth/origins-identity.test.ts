import { expect } from 'chai'
import { OriginPolicy, originProblem } from '../../src/auth/origins.js'
import { IdentityVerifier, signProfileId } from '../../src/auth/identity.js'

describe('allowed origins (compiled)', () => {
  const policy = new OriginPolicy(['https://shop.example', 'https://*.shop.example', 'http://127.0.0.1:8080'])

  it('matches exact origins with headers built once, at compile time', () => {
    const first = policy.headersFor('https://shop.example')
    expect(first).to.deep.equal({ 'Access-Control-Allow-Origin': 'https://shop.example', Vary: 'Origin', 'Access-Control-Expose-Headers': 'Beacon-Route' })
    expect(policy.headersFor('https://shop.example')).to.equal(first)
    expect(policy.headersFor('http://127.0.0.1:8080')).to.not.equal(null)
    expect(policy.headersFor('http://127.0.0.1:8081')).to.equal(null)
  })

  it('matches a wildcard on one or more whole labels of the same scheme and port only', () => {
    for (const origin of ['https://eu.shop.example', 'https://a.b-c.shop.example', 'https://9.shop.example']) {
      expect(policy.headersFor(origin), origin).to.deep.equal({ 'Access-Control-Allow-Origin': origin, Vary: 'Origin', 'Access-Control-Expose-Headers': 'Beacon-Route' })
    }
    for (const origin of ['https://.shop.example', 'https://a..shop.example', 'https://a_b.shop.example', 'https://evil.com/.shop.example',
      'https://x@a.shop.example', 'http://eu.shop.example', 'https://eu.shop.example:444', 'https://eushop.example', 'https://eu.shop.example.com', '']) {
      expect(policy.headersFor(origin), origin).to.equal(null)
    }
    expect(new OriginPolicy([]).empty).to.equal(true)
  })

  it('says what is wrong with a pattern', () => {
    expect(originProblem('https://shop.example')).to.equal(null)
    expect(originProblem('https://*.shop.example:8443')).to.equal(null)
    expect(originProblem('https://Shop.example')).to.include('lowercase')
    expect(originProblem('https://shop.example/')).to.include('no path')
    expect(originProblem('https://a.*.example')).to.include('scheme://host')
    expect(originProblem('https://shop.example:70000')).to.include('65535')
  })
})

describe('identity signatures', () => {
  const secrets = { current: 'bis_new', currentSince: '2026-01-01T00:00:00.000Z', previous: 'bis_old', previousUntil: '2026-01-01T01:00:00.000Z' }
  const verifier = new IdentityVerifier(secrets, stored => stored)
  const at = Date.parse('2026-01-01T00:30:00.000Z')

  it('accepts the HMAC of the profileId under the current secret, and the previous one until its deadline', () => {
    expect(signProfileId('key', 'The quick brown fox jumps over the lazy dog')).to.equal('f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8')
    expect(verifier.verify('ana', signProfileId('bis_new', 'ana'), at)).to.equal(true)
    expect(verifier.verify('ana', signProfileId('bis_old', 'ana'), at)).to.equal(true)
    expect(verifier.verify('ana', signProfileId('bis_old', 'ana'), Date.parse(secrets.previousUntil))).to.equal(false)
    expect(verifier.verify('bob', signProfileId('bis_new', 'ana'), at)).to.equal(false)
    expect(verifier.verify('ana', 'zz'.repeat(32), at)).to.equal(false)
  })
})
