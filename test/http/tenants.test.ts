// Tenant bulkheads: one account's slow sync webhook and flood of requests holds at most its own share
// of the server (BEACON_ACCOUNT_INFLIGHT_MAX), per-account rates (429 with Retry-After), and the
// operations endpoints answering whatever the load.

import { expect } from 'chai'
import { admin, createTenant, discardBeacon, post, removeDir, startBeacon, visitorId, type Answer, type BeaconProcess, type Tenant } from '../helpers/beacon.js'
import { startReceiver, type Receiver } from '../webhooks/helpers.js'
import { until } from '../helpers/until.js'
import { expectError } from '../helpers/errors.js'

const sleep = (ms: number): Promise<void> => new Promise(resolve => setTimeout(resolve, ms))

function median (values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]!
}

/** An event of this tenant, answered with its status and how long it took. */
async function timedEvent (url: string, tenant: Tenant, event = 'pageView'): Promise<{ status: number, ms: number }> {
  const started = performance.now()
  const res = await post(url, '/campaigns/query', { account: tenant.account, visitorId: visitorId(), platform: 'web', event, orderId: 'o-1', path: '/' })
  return { status: res.status, ms: performance.now() - started }
}

/** A sync webhook on purchases whose receiver hangs until released: each purchase holds its request. */
async function slowSyncTenant (url: string, receiver: Receiver): Promise<Tenant> {
  const tenant = await createTenant(url, 'slow')
  const put = await admin(url, 'PUT', `/admin/accounts/${tenant.account}/webhooks/slow`, {
    name: 'slow', enabled: true, trigger: { kind: 'event', events: ['purchase'] },
    request: { method: 'POST', url: `${receiver.url}/in` },
    delivery: { mode: 'sync', timeoutMs: 30_000, batchSize: 1 },
  })
  expect(put.status, JSON.stringify(put.body)).to.equal(200)
  return tenant
}

/**
 * `clients` concurrent senders of the tenant's purchases, each sending again as soon as answered (after
 * a pause when refused); counts what is in flight and what was refused until stop().
 */
function flood (url: string, tenant: Tenant, clients: number): { inflight: () => number, answered: () => number, refused: Answer[], stop: () => Promise<void> } {
  let stopped = false
  let inflight = 0
  let answered = 0
  const refused: Answer[] = []
  const loops = Array.from({ length: clients }, async () => {
    // eslint-disable-next-line no-unmodified-loop-condition -- stop() sets it while the loops await
    while (!stopped) {
      inflight++
      const res = await post(url, '/campaigns/query', { account: tenant.account, visitorId: visitorId(), platform: 'web', event: 'purchase', orderId: 'o-1' }).catch(() => null)
      inflight--
      if (res?.status === 200) answered++
      if (res !== null && res.status !== 200) {
        refused.push(res)
        await sleep(250)
      }
    }
  })
  return { inflight: () => inflight, answered: () => answered, refused, stop: async () => { stopped = true; await Promise.all(loops) } }
}

describe('tenant bulkheads', function () {
  this.timeout(120_000)
  let receiver: Receiver
  let beacon: BeaconProcess | null = null
  /** The receiver holds every request until the test lets go. */
  let holding = true
  const letGo = (): void => {
    holding = false
    receiver.release()
  }

  beforeEach(async () => {
    holding = true
    receiver = await startReceiver(() => holding ? 'hang' : { status: 200 })
  })
  afterEach(async () => {
    letGo()
    await beacon?.stop()
    if (beacon !== null) removeDir(beacon.dataDir)
    beacon = null
    await receiver.close()
  })

  it('keeps serving tenant Y at its own pace, and /readyz, while tenant X is saturated by a slow sync webhook', async () => {
    // The setting: BEACON_INFLIGHT_MAX=100 and 120 concurrent events of one tenant.
    beacon = await startBeacon({ env: { BEACON_INFLIGHT_MAX: '100', BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' } })
    const x = await slowSyncTenant(beacon.url, receiver)
    const y = await createTenant(beacon.url, 'calm')

    const baseline: number[] = []
    for (let i = 0; i < 30; i++) {
      const answer = await timedEvent(beacon.url, y)
      expect(answer.status).to.equal(200)
      baseline.push(answer.ms)
    }

    const load = flood(beacon.url, x, 120)
    try {
      // X is saturated: its share (BEACON_ACCOUNT_INFLIGHT_MAX, half of 100) is held by requests waiting
      // for the receiver, and what it sends beyond is refused at once with 503 and Retry-After.
      await until('X refused beyond its share', () => load.refused.length >= 20)
      expect(load.inflight()).to.be.at.least(50)
      for (const res of load.refused) {
        expectError(res, 'overloaded')
        expect(res.headers.get('retry-after')).to.equal('1')
      }
      const loaded: number[] = []
      for (let i = 0; i < 30; i++) {
        const answer = await timedEvent(beacon.url, y)
        expect(answer.status, 'Y under X\'s load').to.equal(200)
        loaded.push(answer.ms)
      }
      const ready = await fetch(`${beacon.url}/readyz`)
      expect(ready.status).to.equal(200)

      // Y was never queued behind X: all of Y's requests were answered while none of X's was (they are
      // all still held by the receiver), and Y's latency stays of the order of its own baseline.
      expect(load.answered()).to.equal(0)
      expect(load.inflight()).to.be.at.least(50)
      expect(median(loaded), `baseline ${baseline.map(Math.round).join(' ')} / loaded ${loaded.map(Math.round).join(' ')}`)
        .to.be.at.most(Math.max(10 * median(baseline), 3 * Math.max(...baseline)))
    } finally {
      letGo()
      await load.stop()
    }
  })

  it('answers /healthz, /readyz and /metrics while every in-flight slot of the server is taken', async () => {
    beacon = await startBeacon({ env: { BEACON_INFLIGHT_MAX: '4', BEACON_ACCOUNT_INFLIGHT_MAX: '4', BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' } })
    const x = await slowSyncTenant(beacon.url, receiver)
    const load = flood(beacon.url, x, 8)
    try {
      await until('the server full', () => load.refused.length >= 4)
      expect(load.inflight()).to.be.at.least(4)
      for (const path of ['/healthz', '/readyz', '/metrics']) {
        expect((await fetch(beacon.url + path)).status, path).to.equal(200)
      }
    } finally {
      letGo()
      await load.stop()
    }
  })
})

describe('per-account rate limits', function () {
  this.timeout(60_000)
  let beacon: BeaconProcess

  before(async () => { beacon = await startBeacon({ env: { BEACON_ACCOUNT_RATE_PER_SECOND: '1', BEACON_ACCOUNT_RATE_BURST: '3' } }) })
  after(() => discardBeacon(beacon))

  it('refuses an account past the default rate with 429 rate_limited and Retry-After, other accounts unaffected', async () => {
    const a = await createTenant(beacon.url, 'a')
    const b = await createTenant(beacon.url, 'b')
    const statuses = []
    for (let i = 0; i < 4; i++) statuses.push((await timedEvent(beacon.url, a)).status)
    expect(statuses.slice(0, 3)).to.deep.equal([200, 200, 200])
    const refused = await post(beacon.url, '/visitors/query', { account: a.account, visitorId: visitorId(), token: a.token })
    expectError(refused, 'rate_limited')
    expect(refused.body.message).to.equal('The account allows 1 requests per second.')
    expect(Number(refused.headers.get('retry-after'))).to.be.at.least(1)
    expect((await timedEvent(beacon.url, b)).status).to.equal(200)
  })

  it('takes an account\'s own rateLimit from PATCH, and null goes back to the default', async () => {
    const c = await createTenant(beacon.url, 'c')
    const patched = await admin(beacon.url, 'PATCH', `/admin/accounts/${c.account}`, { rateLimit: { perSecond: 0 } })
    expect(patched.status).to.equal(200)
    expect(patched.body.rateLimit).to.deep.equal({ perSecond: 0 })
    for (let i = 0; i < 10; i++) expect((await timedEvent(beacon.url, c)).status).to.equal(200)
    await admin(beacon.url, 'PATCH', `/admin/accounts/${c.account}`, { rateLimit: { perSecond: 1, burst: 1 } })
    expect((await timedEvent(beacon.url, c)).status).to.equal(200)
    // The same account spelt in upper case is the same account: no way around its rate.
    expect((await timedEvent(beacon.url, { ...c, account: c.account.toUpperCase() })).status).to.equal(429)
    const reset = await admin(beacon.url, 'PATCH', `/admin/accounts/${c.account}`, { rateLimit: null })
    expect(reset.body).not.to.have.property('rateLimit')
    expect((await admin(beacon.url, 'PATCH', `/admin/accounts/${c.account}`, { rateLimit: { perSecond: -1 } })).status).to.equal(400)
    expect((await admin(beacon.url, 'PATCH', `/admin/accounts/${c.account}`, { rateLimit: { perSecond: 5, extra: 1 } })).status).to.equal(400)
  })

  it('never counts /healthz, /readyz and /metrics', async () => {
    for (let i = 0; i < 20; i++) {
      for (const path of ['/healthz', '/readyz', '/metrics']) expect((await fetch(beacon.url + path)).status).to.equal(200)
    }
  })
})
