// The webhook contract, run against both transports: embedded (no BEACON_NATS_URL) and JetStream
// (BEACON_NATS_URL pointing at a real nats-server started here, fresh for each test). Then the faults
// of the JetStream transport, each asserting that every delivery arrives at least once and that the
// duplicates carry the same webhook-id: the receiver down for a while, Beacon SIGKILLed mid-stream of
// 5,000 events and restarted, nats-server stopped and restarted mid-stream.

import { expect } from 'chai'
import http, { type IncomingMessage, type ServerResponse } from 'node:http'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { Webhook } from 'standardwebhooks'
import { admin, createTenant, identified, post, removeDir, startBeacon, tempDir, visitorId, type BeaconProcess, type Tenant } from '../helpers/beacon.js'
import { startInProcess, type InProcess } from '../helpers/in-process.js'
import { startNatsServer, type NatsServer } from '../helpers/nats-server.js'
import { startProxy, startReceiver, type Receiver, type Responder } from '../webhooks/helpers.js'
import { until } from '../helpers/until.js'

const SECRET = 'whsec_' + Buffer.from('0123456789abcdef0123456789abcdef').toString('base64')

interface Transport {
  name: string
  /** Start what the transport needs (a fresh nats-server) and answer Beacon's extra environment. */
  up (): Promise<Record<string, string>>
  down (): Promise<void>
}

function embedded (): Transport {
  return { name: 'embedded', up: async () => ({}), down: async () => {} }
}

function jetstream (): Transport {
  let nats: NatsServer | null = null
  return {
    name: 'JetStream',
    async up () {
      nats = await startNatsServer()
      return { BEACON_NATS_URL: nats.url }
    },
    async down () {
      await nats?.close()
      nats = null
    },
  }
}

for (const transport of [embedded(), jetstream()]) {
  describe(`webhook contract, ${transport.name} transport`, () => {
    let beacon: InProcess | null
    let tenant: Tenant
    let receiver: Receiver | null

    const start = async (respond?: Responder): Promise<void> => {
      const env = await transport.up()
      receiver = await startReceiver(respond)
      beacon = await startInProcess(undefined, { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true', ...env })
      beacon.clock.advance(Date.now() - beacon.clock.nowMs())
      tenant = await createTenant(beacon.url)
    }
    beforeEach(() => {
      beacon = null
      receiver = null
    })
    afterEach(async () => {
      await beacon?.close()
      await receiver?.close()
      await transport.down()
    })

    const b = (): InProcess => beacon!
    const rx = (): Receiver => receiver!
    const putWebhook = (id: string, body: Record<string, unknown>) => admin(b().url, 'PUT', `/admin/accounts/${tenant.account}/webhooks/${id}`, body)
    const webhook = (fields: { trigger?: unknown, request?: Record<string, unknown>, delivery?: Record<string, unknown> } = {}) => ({
      name: 'test',
      enabled: true,
      trigger: fields.trigger ?? { kind: 'event', events: ['purchase'] },
      request: { method: 'POST', url: `${rx().url}/customer-journey`, ...fields.request },
      delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1, ...fields.delivery },
    })
    /** The webhook's deliveries of a status, once there are `count` of them. */
    const pollDeliveries = async (id: string, status: string, count: number): Promise<any[]> => {
      let found: any[] = []
      for (let i = 0; i < 500 && found.length < count; i++) {
        found = (await admin(b().url, 'GET', `/admin/accounts/${tenant.account}/webhooks/${id}/deliveries?status=${status}`)).body.deliveries
        if (found.length < count) await new Promise(resolve => setTimeout(resolve, 20))
      }
      expect(found, `${status} deliveries`).to.have.length(count)
      return found
    }
    const purchase = (visitor: string, orderId: string, extra: Record<string, unknown> = {}) =>
      post(b().url, '/campaigns/query', { account: tenant.account, visitorId: visitor, platform: 'web', event: 'purchase', orderId, orderTotal: 10, ...extra })

    it('delivers a selected event with the seed\'s payload shape, Basic auth and a Standard Webhooks signature', async () => {
      await start()
      const saved = await putWebhook('orders', webhook({ request: { auth: { type: 'basic', username: 'shop', password: 'pw' }, signingSecret: SECRET } }))
      expect(saved.status, JSON.stringify(saved.body)).to.equal(200)
      const v = visitorId()
      await purchase(v, 'o-1', identified(tenant, 'ana@example.com'))
      await post(b().url, '/campaigns/query', { account: tenant.account, visitorId: v, platform: 'web', event: 'pageView' })
      await until('one delivery', () => rx().requests.length === 1)
      const [request] = rx().requests
      expect(request!.method).to.equal('POST')
      expect(request!.url).to.equal('/customer-journey')
      expect(request!.headers.authorization).to.equal('Basic ' + Buffer.from('shop:pw').toString('base64'))
      const body = new Webhook(SECRET).verify(request!.body, request!.headers as Record<string, string>) as Record<string, unknown>
      expect(body).to.include({ profile: 'ana@example.com', event: 'purchase' })
      const delivered = await pollDeliveries('orders', 'delivered', 1)
      expect(delivered[0]).to.include({ status: 'delivered', id: request!.headers['webhook-id'] })
    })

    it('renders a custom template with event fields, and sends audience enters', async () => {
      await start()
      await admin(b().url, 'PUT', `/admin/accounts/${tenant.account}/segments/buyers`, { rule: { fact: 'count', event: 'purchase', op: 'gte', value: 1 } })
      await putWebhook('audience', webhook({ trigger: { kind: 'audience', segments: ['buyers'], on: ['enter'] }, request: { payload: '{"who": {{visitorId}}, "segment": {{audience}}, "change": {{change}}}' } }))
      await putWebhook('orders', webhook({ request: { payload: '{"order": {{event.orderId}}, "note": "total {{event.orderTotal}}"}' } }))
      const v = visitorId()
      await purchase(v, 'o-"quoted"')
      await until('two deliveries', () => rx().requests.length === 2)
      const bodies = rx().requests.map(r => JSON.parse(r.body) as Record<string, unknown>)
      expect(bodies).to.deep.include({ who: v, segment: 'buyers', change: 'enter' })
      expect(bodies).to.deep.include({ order: 'o-"quoted"', note: 'total 10' })
    })

    it('sends batches of up to batchSize as one JSON array', async () => {
      await start()
      await putWebhook('batched', webhook({ delivery: { batchSize: 50 } }))
      await Promise.all(Array.from({ length: 120 }, (_, i) => purchase(visitorId(), `o-${i}`)))
      await until('120 items', () => rx().requests.reduce((n, r) => n + (JSON.parse(r.body) as unknown[]).length, 0) === 120)
      for (const r of rx().requests) expect((JSON.parse(r.body) as unknown[]).length).to.be.at.most(50)
      expect(rx().requests.length).to.be.at.most(12)
    })

    it('retries on 503 with Retry-After, then records the delivery with every attempt, same webhook-id each time', async () => {
      await start((_, index) => index < 2 ? { status: 503, headers: { 'retry-after': '0' } } : { status: 200 })
      await putWebhook('orders', webhook())
      await purchase(visitorId(), 'o-1')
      await until('three attempts', () => rx().requests.length === 3)
      expect(new Set(rx().requests.map(r => r.headers['webhook-id'])).size).to.equal(1)
      const delivered = await pollDeliveries('orders', 'delivered', 1)
      expect(delivered[0].attempts.map((a: { status: number }) => a.status)).to.deep.equal([503, 503, 200])
    })

    if (transport.name === 'embedded') {
      // The embedded workers keep a retried batch together; JetStream hands retried records back one by one.
      it('retries a batch as the same group, with the same webhook-id and body', async () => {
        await start((_, index) => index === 0 ? { status: 503, headers: { 'retry-after': '0' } } : { status: 200 })
        await putWebhook('batched', webhook({ delivery: { batchSize: 50 } }))
        await Promise.all(Array.from({ length: 20 }, (_, i) => purchase(visitorId(), `o-${i}`)))
        const items = (): number => rx().requests.filter(r => r.headers['webhook-id'] !== undefined).slice(1).reduce((n, r) => n + (JSON.parse(r.body) as unknown[]).length, 0)
        await until('20 items delivered', () => items() === 20)
        const [failed, ...rest] = rx().requests
        const again = rest.filter(r => r.headers['webhook-id'] === failed!.headers['webhook-id'])
        expect(again).to.have.length(1)
        expect(again[0]!.body).to.equal(failed!.body)
      })
    }

    it('dead-letters a terminal 4xx after one attempt, then delivers it on replay', async () => {
      let accept = false
      await start(() => accept ? { status: 200 } : { status: 422, body: 'unprocessable' })
      await putWebhook('orders', webhook())
      await purchase(visitorId(), 'o-1')
      const dead = await pollDeliveries('orders', 'dead', 1)
      expect(dead[0].attempts).to.have.length(1)
      expect(dead[0].attempts[0]).to.include({ status: 422 })
      accept = true
      const replayed = await admin(b().url, 'POST', `/admin/accounts/${tenant.account}/webhooks/orders/replay`, { deliveryIds: [dead[0].id] })
      expect(replayed.body).to.deep.equal({ replayed: 1 })
      await until('the replayed delivery', () => rx().requests.length === 2)
      expect(rx().requests[1]!.headers['webhook-id']).to.equal(rx().requests[0]!.headers['webhook-id'])
      await pollDeliveries('orders', 'delivered', 1)
    })

    for (const method of ['GET', 'PUT', 'DELETE'] as const) {
      it(`delivers with ${method}${method === 'PUT' ? ' (body)' : ' (payload in the query)'}`, async () => {
        await start()
        await putWebhook('m', webhook({ request: { method, payload: '{"order": {{event.orderId}}, "who": {{visitorId}}}' } }))
        const v = visitorId()
        await purchase(v, 'o&1=2')
        await until('one delivery', () => rx().requests.length === 1)
        const [request] = rx().requests
        expect(request!.method).to.equal(method)
        if (method === 'PUT') expect(JSON.parse(request!.body)).to.deep.equal({ order: 'o&1=2', who: v })
        else expect(Object.fromEntries(new URL(request!.url, 'http://x').searchParams)).to.deep.equal({ order: 'o&1=2', who: v })
      })
    }

    it('makes a sync call while the triggering request is handled', async () => {
      await start()
      await putWebhook('now', webhook({ delivery: { mode: 'sync', timeoutMs: 2000 } }))
      const res = await purchase(visitorId(), 'o-1')
      expect(res.status).to.equal(200)
      expect(rx().requests).to.have.length(1)
    })

    it('answers the triggering request within timeoutMs when a sync receiver hangs, and retries it async', async () => {
      let hang = true
      await start(() => hang ? 'hang' : { status: 200 })
      await putWebhook('slow', webhook({ delivery: { mode: 'sync', timeoutMs: 300 } }))
      const started = Date.now()
      const res = await purchase(visitorId(), 'o-1')
      expect(res.status).to.equal(200)
      expect(Date.now() - started).to.be.below(1500)
      hang = false
      // The retry waits for its backoff on Beacon's clock (this test's manual one): move it along.
      const ticker = setInterval(() => b().clock.advance(2_000), 50)
      const delivered = await pollDeliveries('slow', 'delivered', 1).finally(() => clearInterval(ticker))
      expect(delivered[0].attempts.length).to.equal(2)
      rx().release({ status: 200 })
    })

    it('goes through the configured HTTP proxy', async () => {
      await start()
      const proxy = await startProxy()
      try {
        await putWebhook('proxied', webhook({ delivery: { proxy: proxy.url } }))
        await purchase(visitorId(), 'o-1')
        await until('one delivery', () => rx().requests.length === 1)
        expect(proxy.seen.length).to.be.at.least(1)
      } finally {
        await proxy.close()
      }
    })

    it('runs a schedule at each time: a full sync of the segment\'s members, in batches', async () => {
      await start()
      await admin(b().url, 'PUT', `/admin/accounts/${tenant.account}/segments/vip`, {})
      const members = [visitorId(), visitorId(), visitorId()]
      for (const v of members) await post(b().url, '/visitors/segments', { account: tenant.account, visitorId: v, token: tenant.token, assignees: ['vip'] })
      await post(b().url, '/profiles/segments', { account: tenant.account, profileId: 'ana', token: tenant.token, assignees: ['vip'] })
      await post(b().url, '/visitors/segments', { account: tenant.account, visitorId: members[2], token: tenant.token, removes: ['vip'] })
      await putWebhook('hourly', webhook({
        trigger: { kind: 'schedule', every: '1h', segments: ['vip'] },
        request: { payload: '{"segment": {{audience}}, "who": "{{visitorId}}{{profileId}}"}' },
        delivery: { batchSize: 50, delayMs: 600_000 },
      }))
      b().clock.advance(3_600_000 - (b().clock.nowMs() % 3_600_000) + 1000)
      expect(await b().beacon.runSchedules()).to.equal(0)
      b().clock.advance(3_600_000)
      expect(await b().beacon.runSchedules()).to.equal(0)
      b().clock.advance(600_000)
      expect(await b().beacon.runSchedules()).to.equal(1)
      await until('the sync', () => rx().requests.length === 1)
      const body = JSON.parse(rx().requests[0]!.body) as { segment: string, who: string }[]
      expect(body.map(x => x.who).sort()).to.deep.equal([members[0], members[1], 'ana'].sort())
      expect(body.every(x => x.segment === 'vip')).to.equal(true)
    })

    it('runs a cron schedule without segments as a single call with the account and the time', async () => {
      await start()
      await putWebhook('cron', webhook({
        trigger: { kind: 'schedule', cron: '0 * * * *' },
        request: { payload: '{"account": {{account}}, "at": {{occurredAt}}}' },
      }))
      await b().beacon.runSchedules()
      b().clock.advance(3_600_000)
      expect(await b().beacon.runSchedules()).to.equal(1)
      await until('the call', () => rx().requests.length === 1)
      const body = JSON.parse(rx().requests[0]!.body) as { account: string, at: string }
      expect(body.account).to.equal(tenant.account)
      expect(new Date(body.at).getUTCMinutes()).to.equal(0)
    })

    it('holds a delivery until occurredAt + delayMs (real clock, a Beacon process)', async () => {
      const env = await transport.up()
      const rcv = await startReceiver()
      const proc = await startBeacon({ env: { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true', ...env } })
      try {
        const t = await createTenant(proc.url)
        await admin(proc.url, 'PUT', `/admin/accounts/${t.account}/webhooks/later`, {
          name: 'later', enabled: true, trigger: { kind: 'event', events: ['purchase'] },
          request: { method: 'POST', url: `${rcv.url}/in` },
          delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1, delayMs: 700 },
        })
        const sentMs = Date.now()
        await post(proc.url, '/campaigns/query', { account: t.account, visitorId: visitorId(), platform: 'web', event: 'purchase', orderId: 'o-1' })
        await new Promise(resolve => setTimeout(resolve, 300))
        expect(rcv.requests).to.have.length(0)
        await until('the delayed delivery', () => rcv.requests.length === 1)
        expect(Date.now() - sentMs).to.be.at.least(700)
      } finally {
        await proc.kill()
        await rcv.close()
        removeDir(proc.dataDir)
      }
    })
  })
}

// ---------------------------------------------------------------------------------------------------
// Faults, JetStream transport

/** A receiver on a fixed port that can answer 503, refuse connections (closed), or accept. */
interface FlakyReceiver {
  url: string
  requests: { order: string, webhookId: string, status: number }[]
  mode: 'up' | '503'
  /** Stop listening: connections are refused. */
  down (): Promise<void>
  /** Listen again on the same port. */
  up (): Promise<void>
  close (): Promise<void>
}

async function startFlakyReceiver (): Promise<FlakyReceiver> {
  const requests: FlakyReceiver['requests'] = []
  const state = { mode: 'up' as 'up' | '503' }
  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const status = state.mode === 'up' ? 200 : 503
      const body = Buffer.concat(chunks).toString('utf8')
      const order = body === '' ? '' : String((JSON.parse(body) as { order?: string }).order)
      requests.push({ order, webhookId: String(req.headers['webhook-id']), status })
      res.writeHead(status)
      res.end()
    })
  }
  let server = http.createServer(handler)
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const port = (server.address() as { port: number }).port
  const close = async (): Promise<void> => {
    if (!server.listening) return
    server.closeAllConnections()
    server.close()
    await once(server, 'close')
  }
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    get mode () { return state.mode },
    set mode (mode) { state.mode = mode },
    down: close,
    async up () {
      server = http.createServer(handler)
      server.listen(port, '127.0.0.1')
      await once(server, 'listening')
    },
    close,
  }
}

/** Every order delivered (a 2xx) at least once; every order's requests all with one webhook-id. */
function checkAtLeastOnce (requests: FlakyReceiver['requests'], orders: Iterable<string>): { duplicates: number, requests: number } {
  const delivered = new Set(requests.filter(r => r.status < 300).map(r => r.order))
  const missing = [...orders].filter(order => !delivered.has(order))
  expect(missing.length, `orders never delivered (first: ${missing.slice(0, 5).join(', ')})`).to.equal(0)
  const ids = new Map<string, Set<string>>()
  for (const r of requests) {
    const set = ids.get(r.order) ?? new Set()
    set.add(r.webhookId)
    ids.set(r.order, set)
  }
  for (const [order, set] of ids) expect(set.size, `webhook-ids of ${order}`).to.equal(1)
  const okCount = requests.filter(r => r.status < 300).length
  return { duplicates: okCount - delivered.size, requests: requests.length }
}

/** A tenant with webhook `orders`: each purchase POSTs `{"order": <orderId>}` to <receiver>/in, one a request. */
async function ordersWebhook (base: string, receiverUrl: string): Promise<Tenant> {
  const tenant = await createTenant(base)
  const res = await admin(base, 'PUT', `/admin/accounts/${tenant.account}/webhooks/orders`, {
    name: 'orders', enabled: true, trigger: { kind: 'event', events: ['purchase'] },
    request: { method: 'POST', url: `${receiverUrl}/in`, payload: '{"order": {{event.orderId}}}' },
    delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1 },
  })
  expect(res.status, JSON.stringify(res.body)).to.equal(200)
  return tenant
}

describe('webhook faults, JetStream transport', function () {
  this.timeout(90_000)
  let nats: NatsServer
  let receiver: FlakyReceiver
  let beacon: BeaconProcess | null = null
  // ack_wait 3 s (default 30 s): what a killed process held comes back that much sooner; a live one heartbeats its records.
  const env = (): Record<string, string> => ({ BEACON_WEBHOOK_ALLOW_PRIVATE: 'true', BEACON_NATS_URL: nats.url, BEACON_NATS_ACK_WAIT_MS: '3000' })

  beforeEach(async () => {
    nats = await startNatsServer()
    receiver = await startFlakyReceiver()
    beacon = await startBeacon({ env: env() })
  })
  afterEach(async () => {
    if (beacon !== null) {
      await beacon.kill()
      removeDir(beacon.dataDir)
    }
    await receiver.close()
    await nats.close()
  })

  const setup = (): Promise<Tenant> => ordersWebhook(beacon!.url, receiver.url)
  /** Send orders o-<from>..o-<to - 1>, 50 at a time; the ones answered 200 go into `sent`. */
  const send = async (tenant: Tenant, from: number, to: number, sent: Set<string>): Promise<void> => {
    for (let i = from; i < to; i += 50) {
      await Promise.all(Array.from({ length: Math.min(50, to - i) }, (_, j) => {
        const orderId = `o-${i + j}`
        return post(beacon!.url, '/campaigns/query', { account: tenant.account, visitorId: visitorId(), platform: 'web', event: 'purchase', orderId })
          .then(r => { if (r.status === 200) sent.add(orderId) }, () => {})
      }))
    }
  }
  const delivered = (): Set<string> => new Set(receiver.requests.filter(r => r.status < 300).map(r => r.order))

  it('the receiver down for a while (503, then connection refused): every delivery arrives once it is back', async () => {
    const tenant = await setup()
    const sent = new Set<string>()
    await send(tenant, 0, 100, sent)
    await until('the first 100', () => delivered().size === 100)
    receiver.mode = '503'
    await send(tenant, 100, 200, sent)
    await until('503s answered', () => receiver.requests.filter(r => r.status === 503).length >= 100)
    await receiver.down()
    await send(tenant, 200, 300, sent)
    await new Promise(resolve => setTimeout(resolve, 1500))
    receiver.mode = 'up'
    await receiver.up()
    await send(tenant, 300, 400, sent)
    expect(sent.size).to.equal(400)
    await until('all 400 delivered', () => delivered().size === 400, 60_000)
    const stats = checkAtLeastOnce(receiver.requests, sent)
    console.log(`      receiver down: ${stats.requests} requests for 400 orders, ${stats.duplicates} duplicate 2xx`)
  })

  it('Beacon SIGKILLed mid-stream of 5,000 events and restarted: every order at least once, duplicates with the same webhook-id', async () => {
    const tenant = await setup()
    const sent = new Set<string>()
    await send(tenant, 0, 2500, sent)
    await beacon!.kill()
    beacon = await startBeacon({ dataDir: beacon!.dataDir, env: env() })
    await send(tenant, 2500, 5000, sent)
    expect(sent.size).to.equal(5000)
    // What the killed process held unacknowledged comes back after the consumer's ack_wait (3 s here).
    await until('all 5,000 delivered', () => delivered().size === 5000, 60_000)
    const stats = checkAtLeastOnce(receiver.requests, sent)
    console.log(`      SIGKILL: ${stats.requests} requests for 5,000 orders, ${stats.duplicates} duplicates`)
  })

  it('nats-server stopped and restarted mid-stream: every order at least once, duplicates with the same webhook-id', async () => {
    const tenant = await setup()
    const sent = new Set<string>()
    await send(tenant, 0, 1500, sent)
    await nats.stop()
    // Beacon keeps taking events (the outbox is in LMDB); they wait for NATS.
    await send(tenant, 1500, 2500, sent)
    await new Promise(resolve => setTimeout(resolve, 1000))
    await nats.restart()
    await send(tenant, 2500, 4000, sent)
    expect(sent.size).to.equal(4000)
    await until('all 4,000 delivered', () => delivered().size === 4000, 60_000)
    const stats = checkAtLeastOnce(receiver.requests, sent)
    console.log(`      nats-server restart: ${stats.requests} requests for 4,000 orders, ${stats.duplicates} duplicates`)
  })
})

describe('JetStream transport over TLS (a nats-server that requires it, its certificate from a private CA)', function () {
  this.timeout(60_000)
  // Self-signed for 127.0.0.1 and localhost: the certificate is its own CA.
  const CERT = fileURLToPath(new URL('../webhooks/fixtures/test-cert.pem', import.meta.url))
  const KEY = fileURLToPath(new URL('../webhooks/fixtures/test-key.pem', import.meta.url))
  let nats: NatsServer
  let receiver: Receiver
  let beacon: BeaconProcess | null = null
  let dataDir: string | null = null

  beforeEach(async () => {
    nats = await startNatsServer({ args: ['--tls', '--tlscert', CERT, '--tlskey', KEY] })
    receiver = await startReceiver()
  })
  afterEach(async () => {
    await beacon?.kill()
    if (dataDir !== null) removeDir(dataDir)
    beacon = null
    dataDir = null
    await receiver.close()
    await nats.close()
  })

  it('refuses to start when the server certificate is not trusted, and says why', async () => {
    dataDir = tempDir()
    let failure = ''
    await startBeacon({ dataDir, env: { BEACON_NATS_URL: `tls://127.0.0.1:${nats.port}` } }).then(started => { beacon = started }, (error: Error) => { failure = error.message })
    expect(beacon).to.equal(null)
    expect(failure).to.match(/beacon failed to start/)
    expect(failure).to.match(/unable to verify the first certificate|self[- ]signed certificate/)
  })

  it('connects with the CA given in NODE_EXTRA_CA_CERTS and delivers through the stream', async () => {
    beacon = await startBeacon({ env: { BEACON_NATS_URL: `tls://127.0.0.1:${nats.port}`, NODE_EXTRA_CA_CERTS: CERT, BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' } })
    dataDir = beacon.dataDir
    const ready = await fetch(`${beacon.url}/readyz`).then(async r => ({ status: r.status, body: await r.json() as { checks: { name: string, ok: boolean }[] } }))
    expect(ready.status).to.equal(200)
    expect(ready.body.checks.find(c => c.name === 'nats')?.ok).to.equal(true)
    const tenant = await ordersWebhook(beacon.url, receiver.url)
    const sent = await post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: visitorId(), platform: 'web', event: 'purchase', orderId: 'o-tls' })
    expect(sent.status).to.equal(200)
    await until('the delivery', () => receiver.requests.length === 1)
    expect(JSON.parse(receiver.requests[0]!.body)).to.deep.equal({ order: 'o-tls' })
  })
})
