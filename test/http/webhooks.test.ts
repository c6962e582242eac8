import { expect } from 'chai'
import { Webhook } from 'standardwebhooks'
import { admin, createTenant, post, removeDir, startBeacon, visitorId, type Tenant } from '../helpers/beacon.js'
import { startInProcess, type InProcess } from '../helpers/in-process.js'
import { startProxy, startReceiver, type Receiver, type Responder } from '../webhooks/helpers.js'

const SECRET = 'whsec_' + Buffer.from('0123456789abcdef0123456789abcdef').toString('base64')

async function until (what: string, test: () => boolean, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!test()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, 20))
  }
}

describe('webhooks, embedded transport', () => {
  let beacon: InProcess
  let tenant: Tenant
  let receiver: Receiver

  const start = async (respond?: Responder): Promise<void> => {
    receiver = await startReceiver(respond)
    beacon = await startInProcess(undefined, { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' })
    beacon.clock.advance(Date.now() - beacon.clock.nowMs())
    tenant = await createTenant(beacon.url)
  }
  afterEach(async () => {
    await beacon.close()
    await receiver.close()
  })

  const putWebhook = (id: string, body: Record<string, unknown>) => admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/webhooks/${id}`, body)
  const webhook = (fields: { trigger?: unknown, request?: Record<string, unknown>, delivery?: Record<string, unknown> } = {}) => ({
    name: 'test',
    enabled: true,
    trigger: fields.trigger ?? { kind: 'event', events: ['purchase'] },
    request: { method: 'POST', url: `${receiver.url}/customer-journey`, ...fields.request },
    delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1, ...fields.delivery },
  })
  /** The webhook's deliveries of a status, once there are `count` of them. */
  const pollDeliveries = async (id: string, status: string, count: number): Promise<any[]> => {
    let found: any[] = []
    for (let i = 0; i < 500 && found.length < count; i++) {
      found = (await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/webhooks/${id}/deliveries?status=${status}`)).body.deliveries
      if (found.length < count) await new Promise(resolve => setTimeout(resolve, 20))
    }
    expect(found, `${status} deliveries`).to.have.length(count)
    return found
  }
  const purchase = (visitor: string, orderId: string, extra: Record<string, unknown> = {}) =>
    post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: visitor, platform: 'web', event: 'purchase', orderId, orderTotal: 10, ...extra })

  it('delivers a selected event with the seed\'s payload shape, Basic auth and a Standard Webhooks signature', async () => {
    await start()
    const saved = await putWebhook('orders', webhook({ request: { auth: { type: 'basic', username: 'shop', password: 'pw' }, signingSecret: SECRET } }))
    expect(saved.status, JSON.stringify(saved.body)).to.equal(200)
    expect(JSON.stringify(saved.body)).not.to.include('pw')
    expect(JSON.stringify((await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/webhooks/orders`)).body)).not.to.include(SECRET)
    const v = visitorId()
    await purchase(v, 'o-1', { profileId: 'ana@example.com' })
    await post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: v, platform: 'web', event: 'pageView' })
    await until('one delivery', () => receiver.requests.length === 1)
    const [request] = receiver.requests
    expect(request!.method).to.equal('POST')
    expect(request!.url).to.equal('/customer-journey')
    expect(request!.headers.authorization).to.equal('Basic ' + Buffer.from('shop:pw').toString('base64'))
    expect(request!.headers['content-type']).to.equal('application/json')
    const body = new Webhook(SECRET).verify(request!.body, request!.headers as Record<string, string>) as Record<string, unknown>
    expect(body).to.include({ profile: 'ana@example.com', event: 'purchase' })
    expect(body).to.have.property('occurredAt')
    const delivered = await pollDeliveries('orders', 'delivered', 1)
    expect(delivered[0]).to.include({ status: 'delivered', id: request!.headers['webhook-id'] })
  })

  it('renders a custom template with event fields, and sends audience enters', async () => {
    await start()
    await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/segments/buyers`, { rule: { fact: 'count', event: 'purchase', op: 'gte', value: 1 } })
    await putWebhook('audience', webhook({ trigger: { kind: 'audience', segments: ['buyers'], on: ['enter'] }, request: { payload: '{"who": {{visitorId}}, "segment": {{audience}}, "change": {{change}}}' } }))
    await putWebhook('orders', webhook({ request: { payload: '{"order": {{event.orderId}}, "note": "total {{event.orderTotal}}"}' } }))
    const v = visitorId()
    await purchase(v, 'o-"quoted"')
    await until('two deliveries', () => receiver.requests.length === 2)
    const bodies = receiver.requests.map(r => JSON.parse(r.body) as Record<string, unknown>)
    expect(bodies).to.deep.include({ who: v, segment: 'buyers', change: 'enter' })
    expect(bodies).to.deep.include({ order: 'o-"quoted"', note: 'total 10' })
  })

  it('sends batches of up to batchSize as one JSON array', async () => {
    await start()
    await putWebhook('batched', webhook({ delivery: { batchSize: 50 } }))
    await Promise.all(Array.from({ length: 120 }, (_, i) => purchase(visitorId(), `o-${i}`)))
    await until('120 items', () => receiver.requests.reduce((n, r) => n + (JSON.parse(r.body) as unknown[]).length, 0) === 120)
    for (const r of receiver.requests) expect((JSON.parse(r.body) as unknown[]).length).to.be.at.most(50)
    expect(receiver.requests.length).to.be.at.most(12)
  })

  it('retries on 503 with Retry-After, then records the delivery with every attempt, same webhook-id each time', async () => {
    await start((_, index) => index < 2 ? { status: 503, headers: { 'retry-after': '0' } } : { status: 200 })
    await putWebhook('orders', webhook())
    await purchase(visitorId(), 'o-1')
    await until('three attempts', () => receiver.requests.length === 3)
    expect(new Set(receiver.requests.map(r => r.headers['webhook-id'])).size).to.equal(1)
    const delivered = await pollDeliveries('orders', 'delivered', 1)
    expect(delivered[0].attempts.map((a: { status: number }) => a.status)).to.deep.equal([503, 503, 200])
  })

  it('dead-letters a terminal 4xx after one attempt, then delivers it on replay', async () => {
    let accept = false
    await start(() => accept ? { status: 200 } : { status: 422, body: 'unprocessable' })
    await putWebhook('orders', webhook())
    await purchase(visitorId(), 'o-1')
    const dead = await pollDeliveries('orders', 'dead', 1)
    expect(dead[0].attempts).to.have.length(1)
    expect(dead[0].attempts[0]).to.include({ status: 422 })
    accept = true
    const replayed = await admin(beacon.url, 'POST', `/admin/accounts/${tenant.account}/webhooks/orders/replay`, { deliveryIds: [dead[0].id] })
    expect(replayed.body).to.deep.equal({ replayed: 1 })
    await until('the replayed delivery', () => receiver.requests.length === 2)
    expect(receiver.requests[1]!.headers['webhook-id']).to.equal(receiver.requests[0]!.headers['webhook-id'])
  })

  for (const method of ['GET', 'PUT', 'DELETE'] as const) {
    it(`delivers with ${method}${method === 'PUT' ? ' (body)' : ' (payload in the query)'}`, async () => {
      await start()
      await putWebhook('m', webhook({ request: { method, payload: '{"order": {{event.orderId}}, "who": {{visitorId}}}' } }))
      const v = visitorId()
      await purchase(v, 'o&1=2')
      await until('one delivery', () => receiver.requests.length === 1)
      const [request] = receiver.requests
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
    expect(receiver.requests).to.have.length(1)
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
    const ticker = setInterval(() => beacon.clock.advance(2_000), 50)
    const delivered = await pollDeliveries('slow', 'delivered', 1).finally(() => clearInterval(ticker))
    expect(delivered[0].attempts.length).to.equal(2)
    receiver.release({ status: 200 })
  })

  it('goes through the configured HTTP proxy', async () => {
    await start()
    const proxy = await startProxy()
    try {
      await putWebhook('proxied', webhook({ delivery: { proxy: proxy.url } }))
      await purchase(visitorId(), 'o-1')
      await until('one delivery', () => receiver.requests.length === 1)
      expect(proxy.seen.length).to.be.at.least(1)
    } finally {
      await proxy.close()
    }
  })

  it('runs a schedule at each time: a full sync of the segment\'s members, in batches', async () => {
    await start()
    await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/segments/vip`, {})
    const members = [visitorId(), visitorId(), visitorId()]
    for (const v of members) await post(beacon.url, '/visitors/segments', { account: tenant.account, visitorId: v, token: tenant.token, assignees: ['vip'] })
    await post(beacon.url, '/profiles/segments', { account: tenant.account, profileId: 'ana', token: tenant.token, assignees: ['vip'] })
    await post(beacon.url, '/visitors/segments', { account: tenant.account, visitorId: members[2], token: tenant.token, removes: ['vip'] })
    await putWebhook('hourly', webhook({
      trigger: { kind: 'schedule', every: '1h', segments: ['vip'] },
      request: { payload: '{"segment": {{audience}}, "who": "{{visitorId}}{{profileId}}"}' },
      delivery: { batchSize: 50, delayMs: 600_000 },
    }))
    // Just past an hour boundary, so the next run is an hour away.
    beacon.clock.advance(3_600_000 - (beacon.clock.nowMs() % 3_600_000) + 1000)
    expect(await beacon.beacon.runSchedules()).to.equal(0)
    beacon.clock.advance(3_600_000)
    expect(await beacon.beacon.runSchedules()).to.equal(0) // the hour came, its 10 minutes of delay not yet
    beacon.clock.advance(600_000)
    expect(await beacon.beacon.runSchedules()).to.equal(1)
    await until('the sync', () => receiver.requests.length === 1)
    const body = JSON.parse(receiver.requests[0]!.body) as { segment: string, who: string }[]
    expect(body.map(x => x.who).sort()).to.deep.equal([members[0], members[1], 'ana'].sort())
    expect(body.every(x => x.segment === 'vip')).to.equal(true)
    expect(await beacon.beacon.runSchedules()).to.equal(0)
  })

  it('runs a cron schedule without segments as a single call with the account and the time', async () => {
    await start()
    await putWebhook('cron', webhook({
      trigger: { kind: 'schedule', cron: '0 * * * *' },
      request: { payload: '{"account": {{account}}, "at": {{occurredAt}}}' },
    }))
    await beacon.beacon.runSchedules()
    beacon.clock.advance(3_600_000)
    expect(await beacon.beacon.runSchedules()).to.equal(1)
    await until('the call', () => receiver.requests.length === 1)
    const body = JSON.parse(receiver.requests[0]!.body) as { account: string, at: string }
    expect(body.account).to.equal(tenant.account)
    expect(new Date(body.at).getUTCMinutes()).to.equal(0)
  })

  it('refuses an invalid webhook with 400 and the path of each problem, and answers 404 for an unknown one', async () => {
    await start()
    const res = await putWebhook('bad', { name: '', enabled: true, trigger: { kind: 'event', events: [] }, request: { method: 'PATCH', url: 'ftp://x' }, delivery: { mode: 'async', timeoutMs: 1, batchSize: 0 } })
    expect(res.status).to.equal(400)
    expect(res.body.errors.length).to.be.at.least(3)
    expect((await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/webhooks/nope`)).status).to.equal(404)
  })
})

describe('webhooks with the real clock', () => {
  it('holds a delivery until occurredAt + delayMs', async () => {
    const receiver = await startReceiver()
    const beacon = await startBeacon({ env: { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' } })
    try {
      const tenant = await createTenant(beacon.url)
      await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/webhooks/later`, {
        name: 'later', enabled: true, trigger: { kind: 'event', events: ['purchase'] },
        request: { method: 'POST', url: `${receiver.url}/in` },
        delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1, delayMs: 700 },
      })
      const sentMs = Date.now()
      await post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: visitorId(), platform: 'web', event: 'purchase', orderId: 'o-1' })
      await new Promise(resolve => setTimeout(resolve, 300))
      expect(receiver.requests).to.have.length(0)
      await until('the delayed delivery', () => receiver.requests.length === 1)
      expect(Date.now() - sentMs).to.be.at.least(700)
    } finally {
      await beacon.kill()
      await receiver.close()
      removeDir(beacon.dataDir)
    }
  })
})

describe('webhooks survive a crash', () => {
  it('delivers every one of 5,000 events at least once across a SIGKILL mid-stream, duplicates with the same webhook-id', async function () {
    this.timeout(120_000)
    const receiver = await startReceiver()
    let beacon = await startBeacon({ env: { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' } })
    try {
      const tenant = await createTenant(beacon.url)
      await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/webhooks/orders`, {
        name: 'orders', enabled: true, trigger: { kind: 'event', events: ['purchase'] },
        request: { method: 'POST', url: `${receiver.url}/in`, payload: '{"order": {{event.orderId}}}' },
        delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1 },
      })
      const sent = new Set<string>()
      const send = async (from: number, to: number, url: string): Promise<void> => {
        for (let i = from; i < to; i += 50) {
          const answers = await Promise.all(Array.from({ length: Math.min(50, to - i) }, (_, j) => {
            const orderId = `o-${i + j}`
            return post(url, '/campaigns/query', { account: tenant.account, visitorId: visitorId(), platform: 'web', event: 'purchase', orderId })
              .then(r => { if (r.status === 200) sent.add(orderId) }, () => {})
          }))
          void answers
        }
      }
      await send(0, 2500, beacon.url)
      await beacon.kill()
      beacon = await startBeacon({ dataDir: beacon.dataDir, env: { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' } })
      await send(2500, 5000, beacon.url)
      expect(sent.size).to.equal(5000)
      const seen = (): Set<string> => new Set(receiver.requests.map(r => (JSON.parse(r.body) as { order: string }).order))
      await until('all 5,000 delivered', () => seen().size === 5000, 90_000)
      const ids = new Map<string, Set<string>>()
      for (const r of receiver.requests) {
        const order = (JSON.parse(r.body) as { order: string }).order
        const set = ids.get(order) ?? new Set()
        set.add(String(r.headers['webhook-id']))
        ids.set(order, set)
      }
      for (const [order, set] of ids) expect(set.size, order).to.equal(1)
    } finally {
      await beacon.kill()
      await receiver.close()
      removeDir(beacon.dataDir)
    }
  })
})
