import { expect } from 'chai'
import type { LookupAddress } from 'node:dns'
import { guardedLookup, refusalReason, Sender, TargetRefusedError, type CompiledWebhook } from '../../src/webhooks/index.js'
import { compiled, item, startProxy, startReceiver, type Receiver } from './helpers.js'

describe('SSRF guard', () => {
  describe('refusalReason', () => {
    const refused: [string, RegExp][] = [
      ['127.0.0.1', /loopback/], ['127.8.9.10', /loopback/], ['::1', /loopback/],
      ['10.1.2.3', /private/], ['172.16.0.1', /private/], ['172.31.255.255', /private/], ['192.168.1.1', /private/],
      ['fc00::1', /private/], ['fd12:3456::1', /private/],
      ['169.254.169.254', /metadata/], ['fd00:ec2::254', /metadata/], ['100.100.100.200', /metadata/],
      ['169.254.1.1', /link-local/], ['fe80::1', /link-local/],
      ['0.0.0.0', /unspecified/], ['::', /unspecified/], ['224.0.0.1', /multicast/], ['ff02::1', /multicast/],
      ['100.64.0.1', /carrier-grade/], ['255.255.255.255', /broadcast/],
      ['::ffff:127.0.0.1', /loopback/], ['::ffff:10.0.0.1', /private/], ['::ffff:169.254.169.254', /metadata/],
      ['64:ff9b::10.0.0.1', /private/], ['2002:0a00:0001::1', /private/],
      // issue 27: the deprecated IPv4-compatible form, which ipaddr.js calls unicast, and the rest of ::/8.
      ['::127.0.0.1', /reserved/], ['::7f00:1', /reserved/], ['::10.0.0.1', /reserved/], ['::a00:1', /reserved/], ['::8.8.8.8', /reserved/],
      ['::2', /reserved/], ['0:ff::1', /reserved/],
      // Embeddings ipaddr.js names: SIIT (RFC 6145), local-use NAT64 (RFC 8215), Teredo, site-local (RFC 3879).
      ['::ffff:0:127.0.0.1', /loopback/], ['64:ff9b:1::a00:1', /special-purpose/], ['2001:0:4136:e378::1', /special-purpose/], ['fec0::1', /special-purpose/],
    ]
    for (const [address, reason] of refused) {
      it(`refuses ${address}`, () => expect(refusalReason(address)).to.match(reason))
    }

    it('allows public unicast addresses, also when mapped or behind NAT64', () => {
      for (const address of ['8.8.8.8', '1.1.1.1', '172.32.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8', '64:ff9b::8.8.8.8']) {
        expect(refusalReason(address), address).to.equal(null)
      }
    })
  })

  describe('guardedLookup', () => {
    it('fails the lookup of a name that resolves to loopback, in both answer forms', async () => {
      for (const all of [true, false]) {
        const err = await new Promise<unknown>(resolve => guardedLookup('localhost', { all }, (e) => resolve(e)))
        expect(err).to.be.instanceOf(TargetRefusedError)
        expect((err as TargetRefusedError).message).to.match(/localhost resolves to (127\.0\.0\.1|::1), a loopback address/)
      }
    })

    it('passes through the lookup of an IP that is public', async () => {
      const answer = await new Promise<LookupAddress[]>((resolve, reject) =>
        guardedLookup('8.8.8.8', { all: true }, (e, a) => e === null ? resolve(a as LookupAddress[]) : reject(e)))
      expect(answer).to.deep.equal([{ address: '8.8.8.8', family: 4 }])
    })
  })

  describe('Sender with private targets refused (the default)', () => {
    let guarded: Sender
    let open: Sender
    let r: Receiver
    before(async () => {
      guarded = new Sender()
      open = new Sender({ allowPrivate: true })
      r = await startReceiver()
    })
    after(async () => {
      await guarded.close()
      await open.close()
      await r.close()
    })

    it('refuses 127.0.0.1, localhost, 10.x, 169.254.169.254, [::1] and [::ffff:127.0.0.1] as terminal, without connecting', async () => {
      const targets: [string, RegExp][] = [
        [`http://127.0.0.1:${r.port}/`, /127\.0\.0\.1 is a loopback address/],
        [`http://localhost:${r.port}/`, /localhost is a loopback name/],
        ['http://10.0.0.1/', /10\.0\.0\.1 is a private address/],
        ['http://169.254.169.254/latest/meta-data/', /169\.254\.169\.254 is a cloud metadata address/],
        [`http://[::1]:${r.port}/`, /::1 is a loopback address/],
        [`http://[::ffff:127.0.0.1]:${r.port}/`, /::ffff:7f00:1 is a loopback address/],
        [`http://[::127.0.0.1]:${r.port}/`, /::7f00:1 is a reserved address/],
      ]
      for (const [url, message] of targets) {
        const result = await guarded.sendOnce(compiled(url), [item()])
        expect(result, url).to.include({ outcome: 'terminal', errorCode: 'refused' })
        expect(result.error, url).to.match(message).and.match(/BEACON_WEBHOOK_ALLOW_PRIVATE=true/)
      }
      expect(r.requests).to.have.length(0)
    })

    it('checks the address actually connected to: a name that resolves to loopback is refused at connect', async () => {
      // As if a public name's DNS answer changed to 127.0.0.1 after the webhook was saved.
      const hook: CompiledWebhook = { ...compiled(`http://localhost:${r.port}/`), targetRefusal: null }
      const result = await guarded.sendOnce(hook, [item()])
      expect(result).to.include({ outcome: 'terminal', errorCode: 'refused' })
      expect(result.error).to.match(/localhost resolves to .*, a loopback address/)
      expect(r.requests).to.have.length(0)
    })

    it('allows them all when allowPrivate is true', async () => {
      expect((await open.sendOnce(compiled(`http://127.0.0.1:${r.port}/`), [item()])).outcome).to.equal('delivered')
      expect((await open.sendOnce({ ...compiled(`http://localhost:${r.port}/`) }, [item()])).outcome).to.equal('delivered')
      expect(r.requests).to.have.length(2)
    })

    it('refuses a proxy on a private address unless the operator trusts it, and checks the target either way', async () => {
      const proxy = await startProxy()
      const trusting = new Sender({ trustedProxies: [proxy.url] })
      try {
        const viaProxy = (url: string): CompiledWebhook => compiled(url, { delivery: { proxy: proxy.url } })
        const untrusted = await guarded.sendOnce(viaProxy('http://hooks.example.test/x'), [item()])
        expect(untrusted).to.include({ outcome: 'terminal', errorCode: 'refused' })
        expect(untrusted.error).to.match(/proxy 127\.0\.0\.1 is a loopback address/)

        const privateTarget = await trusting.sendOnce(viaProxy(`http://127.0.0.1:${r.port}/`), [item()])
        expect(privateTarget).to.include({ outcome: 'terminal', errorCode: 'refused' })
        expect(proxy.seen).to.have.length(0)

        // A trusted proxy gets names unresolved: it does the lookup and applies its own egress rules.
        const named = await trusting.sendOnce(viaProxy('http://hooks.example.test/x'), [item()])
        expect(named).to.include({ outcome: 'delivered', status: 200 })
        expect(proxy.seen).to.deep.equal([{ method: 'POST', target: 'http://hooks.example.test/x' }])
      } finally {
        await trusting.close()
        await proxy.close()
      }
    })

    it('checks the proxy address connected to, and fails closed when the target name cannot be resolved to check it', async () => {
      const proxy = await startProxy()
      try {
        const named = compiled('http://93.184.215.14/x', { delivery: { proxy: proxy.url.replace('127.0.0.1', 'localhost') } })
        const refused = await guarded.sendOnce({ ...named, proxyRefusal: null }, [item()])
        expect(refused).to.include({ outcome: 'terminal', errorCode: 'refused' })
        expect(refused.error).to.match(/localhost resolves to/)

        const unresolvable = compiled('http://hooks.example.test/x', { delivery: { proxy: proxy.url } })
        const result = await guarded.sendOnce({ ...unresolvable, proxyRefusal: null }, [item()])
        expect(result).to.include({ outcome: 'retry', errorCode: 'connection' })
        expect(result.error).to.match(/cannot resolve hooks\.example\.test to check it/)
        expect(proxy.seen).to.have.length(0)
      } finally {
        await proxy.close()
      }
    })
  })
})
