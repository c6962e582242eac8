// The client's address: the peer's, or behind a trusted proxy the first untrusted X-Forwarded-For hop
// from the right (what a client writes in the header itself is never believed past that).

import { expect } from 'chai'
import { bareAddress, clientAddress, trustedProxySet } from '../../src/http/client-address.js'
import { ConfigError, loadConfig } from '../../src/config.js'

describe('client address', () => {
  const proxies = trustedProxySet(['10.0.0.2', '10.0.0.3', '::1'])

  it('reads addresses without IPv4-mapped prefixes or brackets, and nothing else', () => {
    expect(bareAddress('::ffff:203.0.113.7')).to.equal('203.0.113.7')
    expect(bareAddress('0000:0000:0000:0000:0000:ffff:203.0.113.7')).to.equal('203.0.113.7')
    expect(bareAddress(' [2001:DB8::1] ')).to.equal('2001:db8::1')
    expect(bareAddress('unknown')).to.equal('')
    expect(bareAddress('203.0.113.7:443')).to.equal('')
  })

  it('is the peer when it is no trusted proxy, whatever X-Forwarded-For says', () => {
    expect(clientAddress('198.51.100.1', '203.0.113.7', proxies)).to.equal('198.51.100.1')
    expect(clientAddress('10.0.0.2', '203.0.113.7', new Set())).to.equal('10.0.0.2')
  })

  it('behind trusted proxies, is the first hop from the right that is not one of them', () => {
    expect(clientAddress('10.0.0.2', '203.0.113.7', proxies)).to.equal('203.0.113.7')
    expect(clientAddress('::ffff:10.0.0.2', '1.2.3.4, 203.0.113.7, 10.0.0.3', proxies)).to.equal('203.0.113.7')
    expect(clientAddress('::1', '2001:db8::5', proxies)).to.equal('2001:db8::5')
    // No header, or only proxies in it: the peer.
    expect(clientAddress('10.0.0.2', '', proxies)).to.equal('10.0.0.2')
    expect(clientAddress('10.0.0.2', '10.0.0.3', proxies)).to.equal('10.0.0.2')
    // A malformed hop: what is left of it is not trusted either.
    expect(clientAddress('10.0.0.2', '203.0.113.7, garbage', proxies)).to.equal('10.0.0.2')
  })

  it('takes BEACON_TRUSTED_PROXIES as IP addresses separated by commas, naming a bad one', () => {
    expect(loadConfig({}).trustedProxies).to.deep.equal([])
    expect(loadConfig({ BEACON_TRUSTED_PROXIES: '10.0.0.2, ::1' }).trustedProxies).to.deep.equal(['10.0.0.2', '::1'])
    expect(() => loadConfig({ BEACON_TRUSTED_PROXIES: '10.0.0.2, 10.0.0.0/8' })).to.throw(ConfigError, 'BEACON_TRUSTED_PROXIES: expected IP addresses separated by commas; "10.0.0.0/8" is not one')
  })
})
