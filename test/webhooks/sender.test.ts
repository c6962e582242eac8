import { expect } from 'chai'
import { Webhook } from 'standardwebhooks'
import { renderRequest, Sender } from '../../src/webhooks/index.js'
import { batchIdOf } from '../../src/webhooks/batch-id.js'
import { ACCOUNT, compiled, item, SECRET, settle, startProxy, startReceiver, TEST_CERT, type Receiver, type Responder } from './helpers.js'

describe('Sender.sendOnce', () => {
  let sender: Sender
  const receivers: Receiver[] = []
  before(() => { sender = new Sender({ allowPrivate: true, ca: [TEST_CERT] }) })
  after(async () => { await sender.close() })
  afterEach(async () => { for (const r of receivers.splice(0)) await r.close() })

  async function receiver (respond?: Responder, tls = false): Promise<Receiver> {
    const r = await startReceiver(respond, { tls })
    receivers.push(r)
    return r
  }

  describe('methods', () => {
    for (const method of ['POST', 'PUT'] as const) {
      it(`${method} sends the rendered payload as a JSON body with auth, custom headers and the webhook id`, async () => {
        const r = await receiver()
        const hook = compiled(r.url + '/customer-journey', {
          request: {
            method,
            auth: { type: 'basic', username: 'svc', password: 'pw' },
            headers: { 'X-Source': 'beacon', 'X-Profile': '{{profileId}}' },
          },
        })
        const one = item({ profileId: 'ann@example.com', audience: 'vip' })
        const result = await sender.sendOnce(hook, [one])
        expect(result).to.include({ outcome: 'delivered', status: 200, deliveryId: one.id })
        const got = r.requests[0]!
        expect(got.method).to.equal(method)
        expect(got.url).to.equal('/customer-journey')
        expect(got.headers).to.include({
          'content-type': 'application/json',
          authorization: 'Basic ' + Buffer.from('svc:pw').toString('base64'),
          'x-source': 'beacon',
          'x-profile': 'ann@example.com',
          'webhook-id': one.id,
          'user-agent': 'Beacon-Webhooks/1',
        })
        expect(got.headers['webhook-timestamp']).to.match(/^\d{10}$/)
        expect(JSON.parse(got.body)).to.deep.equal({
          profile: 'ann@example.com', audience: 'vip', event: 'purchase', occurredAt: new Date(one.occurredAtMs).toISOString(),
          account: ACCOUNT, visitorId: null, profileId: 'ann@example.com', fields: null,
        })
      })
    }

    for (const method of ['GET', 'DELETE'] as const) {
      it(`${method} carries the payload in the query, URL-encoded, with no body`, async () => {
        const r = await receiver()
        const hook = compiled(r.url + '/users/{{profileId}}?source=beacon', {
          request: { method, payload: '{"event":{{event}},"note":"x{{event.note}}","n":{{event.n}},"v":{{visitorId}}}', auth: { type: 'bearer', token: 'tok' } },
        })
        const one = item({ profileId: 'a&b=c?d#e', event: 'köp', eventFields: { note: 'ü & = ? #', n: 2 } })
        const result = await sender.sendOnce(hook, [one])
        expect(result.outcome).to.equal('delivered')
        const got = r.requests[0]!
        expect(got.method).to.equal(method)
        expect(got.body).to.equal('')
        expect(got.headers).not.to.have.property('content-type')
        expect(got.headers.authorization).to.equal('Bearer tok')
        expect(got.url).to.equal('/users/a%26b%3Dc%3Fd%23e?source=beacon&event=k%C3%B6p&note=x%C3%BC%20%26%20%3D%20%3F%20%23&n=2')
        const url = new URL(got.url, r.url)
        expect(decodeURIComponent(url.pathname)).to.equal('/users/a&b=c?d#e')
        expect(Object.fromEntries(url.searchParams)).to.deep.equal({ source: 'beacon', event: 'köp', note: 'xü & = ? #', n: '2' })
      })
    }
  })

  describe('batches', () => {
    it('sends a batch of 50 as one request whose body is a JSON array of 50 payloads, with a stable batch id', async () => {
      const r = await receiver()
      const hook = compiled(r.url, { delivery: { batchSize: 50 }, request: { payload: '{"id":{{profileId}}}' } })
      const items = Array.from({ length: 50 }, () => item())
      const first = await sender.sendOnce(hook, items)
      const again = await sender.sendOnce(hook, [...items].reverse())
      expect(first.outcome).to.equal('delivered')
      expect(r.requests).to.have.length(2)
      const body = JSON.parse(r.requests[0]!.body) as { id: string }[]
      expect(body).to.have.length(50)
      expect(body.map(p => p.id)).to.deep.equal(items.map(i => i.context.profileId))
      expect(first.deliveryId).to.match(/^batch_[0-9a-f]{32}$/)
      expect(r.requests[0]!.headers['webhook-id']).to.equal(first.deliveryId)
      expect(again.deliveryId).to.equal(first.deliveryId)
    })

    it('names a batch batch_ + the first 32 hex digits of SHA-256 over its item ids, sorted, each followed by a newline', () => {
      // Receivers deduplicate on this id: its recipe (docs/webhooks.md) must not drift. Expected value
      // computed outside Node: sha256("10.hook\n11.hook\n9.hook\n") (string order: "10" < "11" < "9").
      const items = ['10.hook', '9.hook', '11.hook'].map(id => ({ ...item(), id }))
      expect(batchIdOf(items)).to.equal('batch_12d9c0f860b2fcb3551e2a26ccf25888')
      expect(batchIdOf([items[0]!])).to.equal('10.hook')
    })

    it('sends an item that has a messageId (a row resent after a takeover) under it, alone and in a batch', async () => {
      const r = await receiver()
      const resent = { ...item(), id: 'node-b:4.hook', messageId: 'node-a:9.hook' }
      const result = await sender.sendOnce(compiled(r.url), [resent])
      expect(result).to.include({ outcome: 'delivered', deliveryId: 'node-a:9.hook' })
      expect(r.requests[0]!.headers['webhook-id']).to.equal('node-a:9.hook')
      // The batch id is over the webhook-ids: the same as a batch of the first owner's items.
      const others = ['10.hook', '11.hook'].map(id => ({ ...item(), id }))
      expect(batchIdOf([...others, { ...item(), id: '3.hook', messageId: '9.hook' }])).to.equal('batch_12d9c0f860b2fcb3551e2a26ccf25888')
    })

    it('sends a single object with batchSize 1 and a one-element array with batchSize > 1', () => {
      const one = item()
      expect(renderRequest(compiled('https://h.example.com/'), [one]).body).to.match(/^\{/)
      expect(JSON.parse(renderRequest(compiled('https://h.example.com/', { delivery: { batchSize: 10 } }), [one]).body!)).to.have.length(1)
      expect(() => renderRequest(compiled('https://h.example.com/'), [one, item()])).to.throw(/1 to 1 items/)
    })
  })

  it('signs per Standard Webhooks so the receiver verifies body and headers with the standardwebhooks package', async () => {
    const r = await receiver()
    const hook = compiled(r.url, { request: { signingSecret: SECRET }, delivery: { batchSize: 3 } })
    const items = [item({ profileId: 'é "quoted"' }), item(), item()]
    const result = await sender.sendOnce(hook, items)
    expect(result.outcome).to.equal('delivered')
    const got = r.requests[0]!
    const verified = new Webhook(SECRET).verify(got.body, got.headers as Record<string, string>)
    expect(verified).to.deep.equal(JSON.parse(got.body))
    expect(got.headers['webhook-signature']).to.match(/^v1,/)
    expect(() => new Webhook(SECRET).verify(got.body + ' ', got.headers as Record<string, string>)).to.throw(/No matching signature/)

    const getHook = compiled(r.url, { request: { method: 'GET', signingSecret: SECRET } })
    await sender.sendOnce(getHook, [item()])
    const get = r.requests[1]!
    expect(() => new Webhook(SECRET).verify('', get.headers as Record<string, string>)).not.to.throw()
  })

  describe('classification', () => {
    it('gives up within about timeoutMs on a receiver that never answers, as a retry', async () => {
      const r = await receiver(() => 'hang')
      const started = Date.now()
      const result = await sender.sendOnce(compiled(r.url, { delivery: { timeoutMs: 300 } }), [item()])
      const tookMs = Date.now() - started
      expect(result).to.include({ outcome: 'retry', errorCode: 'timeout', error: 'timed out after 300 ms' })
      expect(result).not.to.have.property('status')
      expect(tookMs).to.be.within(280, 1000)
    })

    it('retries on 5xx and 408 with an excerpt of the body, and is terminal on other 4xx and 3xx', async () => {
      const replies = [
        { status: 500, body: 'database\n  down ' + 'x'.repeat(2000) },
        { status: 408 },
        { status: 404, body: 'no such hook' },
        { status: 301, headers: { location: 'http://169.254.169.254/' } },
        { status: 204 },
      ]
      const r = await receiver((_, i) => replies[i]!)
      const hook = compiled(r.url)
      const results = []
      for (let i = 0; i < replies.length; i++) results.push(await sender.sendOnce(hook, [item()]))
      expect(results.map(x => [x.outcome, x.status])).to.deep.equal([['retry', 500], ['retry', 408], ['terminal', 404], ['terminal', 301], ['delivered', 204]])
      expect(results[0]!.error).to.match(/^HTTP 500: database down x+/)
      expect(results[0]!.error!.length).to.be.at.most(500)
      expect(results[2]!.error).to.equal('HTTP 404: no such hook')
      expect(r.requests).to.have.length(5) // the redirect was not followed
    })

    it('honours Retry-After in seconds or as an HTTP date on 429 and 503, capped at an hour', async () => {
      const inTwoMinutes = new Date(Date.now() + 120_000).toUTCString()
      const replies = [
        { status: 429, headers: { 'retry-after': '7' } },
        { status: 503, headers: { 'retry-after': inTwoMinutes } },
        { status: 429, headers: { 'retry-after': '999999' } },
        { status: 429, headers: { 'retry-after': 'soon' } },
      ]
      const r = await receiver((_, i) => replies[i]!)
      const hook = compiled(r.url)
      const results = []
      for (let i = 0; i < replies.length; i++) results.push(await sender.sendOnce(hook, [item()]))
      expect(results[0]).to.include({ outcome: 'retry', status: 429, retryAfterMs: 7000 })
      expect(results[1]!.retryAfterMs).to.be.within(115_000, 120_000)
      expect(results[2]!.retryAfterMs).to.equal(3_600_000)
      expect(results[3]).not.to.have.property('retryAfterMs')
    })

    it('retries a refused connection as a connection error', async () => {
      const r = await receiver()
      const url = r.url
      await r.close()
      receivers.splice(0)
      const result = await sender.sendOnce(compiled(url), [item()])
      expect(result).to.include({ outcome: 'retry', errorCode: 'connection' })
      expect(result.error).to.match(/ECONNREFUSED/)
    })

    it('reuses the pooled socket after draining a response body', async () => {
      const r = await receiver(() => ({ status: 200, body: 'ok'.repeat(1000) }))
      const hook = compiled(r.url)
      for (let i = 0; i < 3; i++) {
        expect((await sender.sendOnce(hook, [item()])).outcome).to.equal('delivered')
        await settle() // let undici put the socket back in the pool
      }
      const ports = new Set(r.requests.map(x => x.remotePort))
      expect(ports.size).to.equal(1)
    })
  })

  describe('the exchange', () => {
    it('answers once a response body passes the drain limit, and closes that socket instead of reading on', async () => {
      const big = 'x'.repeat(200_000)
      const r = await receiver(() => ({ status: 200, body: big }))
      const hook = compiled(r.url)
      expect((await sender.sendOnce(hook, [item()])).outcome).to.equal('delivered')
      await settle()
      expect((await sender.sendOnce(hook, [item()])).outcome).to.equal('delivered')
      expect(new Set(r.requests.map(x => x.remotePort)).size).to.equal(2)
    })

    it('keeps an excerpt of a large error body', async () => {
      const r = await receiver(() => ({ status: 500, body: 'boom '.repeat(50_000) }))
      const result = await sender.sendOnce(compiled(r.url), [item()])
      expect(result).to.include({ outcome: 'retry', status: 500, errorCode: 'http_status' })
      expect(result.error).to.match(/^HTTP 500: boom boom/)
      expect(result.error!.length).to.be.at.most(500)
    })

    it('masks credential-looking values in the error excerpt it keeps, and keeps the status and the rest', async () => {
      const body = 'connect failed: db_password=hunter2&user=app; {"apiKey": "sk_live_123", "note": "kept"} ' +
        'Authorization: Bearer eyJhbGciOi.payload.sig session_id=abc123 token: t0k3n plain words stay'
      const r = await receiver(() => ({ status: 500, body }))
      const result = await sender.sendOnce(compiled(r.url), [item()])
      expect(result).to.include({ status: 500, errorCode: 'http_status' })
      for (const secret of ['hunter2', 'sk_live_123', 'eyJhbGciOi', 'abc123', 't0k3n']) expect(result.error).not.to.include(secret)
      expect(result.error).to.include('HTTP 500: connect failed: db_password=***&user=app;')
      expect(result.error).to.include('"apiKey": "***", "note": "kept"')
      expect(result.error).to.include('session_id=***')
      expect(result.error).to.include('plain words stay')
    })

    it('bounds the wait for a free socket by timeoutMs as well', async () => {
      const narrow = new Sender({ allowPrivate: true, connectionsPerOrigin: 1 })
      const r = await receiver(() => 'hang')
      try {
        const hook = compiled(r.url, { delivery: { timeoutMs: 300 } })
        const started = Date.now()
        const [first, second] = await Promise.all([narrow.sendOnce(hook, [item()]), narrow.sendOnce(hook, [item()])])
        expect(first).to.include({ outcome: 'retry', errorCode: 'timeout' })
        expect(second).to.include({ outcome: 'retry', errorCode: 'timeout' })
        expect(Date.now() - started).to.be.below(2000)
        expect(r.requests).to.have.length(1) // the second never got a socket
      } finally {
        r.release()
        await narrow.close()
      }
    })

    it('sends a path written with characters outside ASCII percent-encoded, as URL does', async () => {
      const r = await receiver()
      const result = await sender.sendOnce(compiled(r.url + '/über/{{profileId}}?q=ä'), [item({ profileId: 'p 1' })])
      expect(result.outcome).to.equal('delivered')
      expect(r.requests[0]!.url).to.equal('/%C3%BCber/p%201?q=%C3%A4')
    })
  })

  describe('through a proxy', () => {
    it('forwards an http target through the proxy in absolute form', async () => {
      const r = await receiver()
      const proxy = await startProxy()
      try {
        const hook = compiled(r.url + '/via-proxy', { delivery: { proxy: proxy.url } })
        const result = await sender.sendOnce(hook, [item()])
        expect(result.outcome).to.equal('delivered')
        expect(proxy.seen).to.deep.equal([{ method: 'POST', target: r.url + '/via-proxy' }])
        expect(r.requests[0]!.url).to.equal('/via-proxy')
      } finally {
        await proxy.close()
      }
    })

    it('tunnels an https target through the proxy with CONNECT', async () => {
      const r = await receiver(undefined, true)
      const proxy = await startProxy()
      try {
        const hook = compiled(r.url + '/tls', { delivery: { proxy: proxy.url }, request: { signingSecret: SECRET } })
        const result = await sender.sendOnce(hook, [item()])
        expect(result.outcome, result.error).to.equal('delivered')
        expect(proxy.seen).to.deep.equal([{ method: 'CONNECT', target: `127.0.0.1:${r.port}` }])
        const got = r.requests[0]!
        expect(() => new Webhook(SECRET).verify(got.body, got.headers as Record<string, string>)).not.to.throw()
      } finally {
        await proxy.close()
      }
    })
  })
})
