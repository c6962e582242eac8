// Replays of the retained event log (docs/event-log.md, "Replay"): past events resent to one webhook or
// destination, in order, as new deliveries marked with the replay's id, through the delivery queue, a
// bounded number at once; progress, list, cancel, refusals; resumed after a SIGKILL. In-process Beacons
// (manual clock) and a real Beacon process, real HTTP receivers, real LMDB.

import { expect } from 'chai'
import { admin, createTenant, identified, post, removeDir, startBeacon, visitorId, type BeaconProcess, type Tenant } from '../helpers/beacon.js'
import { startInProcess, type InProcess } from '../helpers/in-process.js'
import { expectError } from '../helpers/errors.js'
import { until } from '../helpers/until.js'
import { startReceiver, type Receiver } from '../webhooks/helpers.js'
import { MetaCapiDouble } from '../destinations/doubles/meta-capi-double.js'

const HOUR_MS = 3_600_000

interface Replay { id: string, state: string, read: number, queued: number, skipped: number, delivered: number, failed: number, inFlight: number, walked: boolean, error: string | null }

const webhook = (url: string, events: string[] = ['purchase', 'pageView'], extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  name: 'orders', enabled: true, trigger: { kind: 'event', events },
  request: { method: 'POST', url: `${url}/in`, payload: '{"event": {{event}}, "order": {{event.orderId}}, "visitor": {{visitorId}}, "at": {{occurredAt}}, "replay": {{replay}}}' },
  delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1 },
  ...extra,
})

async function replayOf (base: string, account: string, id: string): Promise<Replay> {
  const res = await admin(base, 'GET', `/admin/accounts/${account}/replays/${id}`)
  expect(res.status, JSON.stringify(res.body)).to.equal(200)
  return res.body
}

async function startReplay (base: string, account: string, body: Record<string, unknown>): Promise<Replay> {
  const res = await admin(base, 'POST', `/admin/accounts/${account}/replays`, body)
  expect(res.status, JSON.stringify(res.body)).to.equal(202)
  return res.body
}

describe('POST /admin/accounts/{account}/replays', () => {
  let beacon: InProcess
  let tenant: Tenant
  let receiver: Receiver
  beforeEach(async () => {
    beacon = await startInProcess()
    tenant = await createTenant(beacon.url)
    receiver = await startReceiver()
  })
  afterEach(async () => {
    await beacon.close()
    await receiver.close()
  })

  const send = async (visitor: string, fields: Record<string, unknown>): Promise<void> => {
    const res = await post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: visitor, platform: 'web', event: 'purchase', ...fields })
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
  }
  const bodies = (): Record<string, unknown>[] => receiver.requests.map(r => JSON.parse(r.body) as Record<string, unknown>)

  it('resends the range\'s events in order to a webhook made after them, as new deliveries marked with the replay', async () => {
    const a = visitorId()
    const b = visitorId()
    const startMs = beacon.clock.nowMs()
    for (let i = 0; i < 6; i++) {
      await send(i % 2 === 0 ? a : b, { orderId: `o-${i}` })
      beacon.clock.advance(1000)
    }
    await send(a, { event: 'pageView', path: '/x' })
    beacon.clock.advance(HOUR_MS)
    await send(a, { orderId: 'o-later' }) // outside the range
    // The webhook did not exist when they came: nothing was sent then.
    expect((await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/webhooks/orders`, webhook(receiver.url))).status).to.equal(200)
    const started = await startReplay(beacon.url, tenant.account, {
      from: new Date(startMs).toISOString(), to: new Date(startMs + 10_000).toISOString(), target: { webhook: 'orders' }, kinds: ['purchase'],
    })
    expect(started.state).to.equal('running')
    await until('the replay done', async () => (await replayOf(beacon.url, tenant.account, started.id)).state === 'done')
    const done = await replayOf(beacon.url, tenant.account, started.id)
    expect(done).to.deep.include({ read: 6, queued: 6, skipped: 0, delivered: 6, failed: 0, inFlight: 0, walked: true, error: null })
    // Every visitor's events in the order they came, each marked, at its first time.
    expect(bodies().map(body => body.order).sort()).to.deep.equal(['o-0', 'o-1', 'o-2', 'o-3', 'o-4', 'o-5'])
    expect(bodies().filter(body => body.visitor === a).map(body => body.order)).to.deep.equal(['o-0', 'o-2', 'o-4'])
    expect(bodies().filter(body => body.visitor === b).map(body => body.order)).to.deep.equal(['o-1', 'o-3', 'o-5'])
    expect(bodies().find(body => body.order === 'o-0')!.at).to.equal(new Date(startMs).toISOString())
    expect(bodies().every(body => body.replay === started.id)).to.equal(true)
    expect(receiver.requests.every(r => r.headers['beacon-replay'] === started.id)).to.equal(true)
    const ids = receiver.requests.map(r => r.headers['webhook-id'])
    expect(new Set(ids).size).to.equal(6)
    // The deliveries log shows them, marked.
    const listed = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/webhooks/orders/deliveries?status=delivered`)
    expect(listed.body.deliveries.map((d: { id: string }) => d.id).sort()).to.deep.equal([...ids].sort())
    // A live event afterwards carries no marker.
    await send(b, { orderId: 'o-live' })
    await until('the live delivery', () => receiver.requests.length === 7)
    expect(bodies()[6]).to.deep.include({ order: 'o-live', replay: null })
    expect(receiver.requests[6]!.headers['beacon-replay']).to.equal(undefined)
    // A second replay of the same range (a moment later) sends them again, under new ids.
    beacon.clock.advance(1000)
    const again = await startReplay(beacon.url, tenant.account, { from: new Date(startMs).toISOString(), to: new Date(startMs + 10_000).toISOString(), target: { webhook: 'orders' } })
    await until('the second replay done', async () => (await replayOf(beacon.url, tenant.account, again.id)).state === 'done')
    // Without kinds: the pageView too (the webhook takes it).
    expect(await replayOf(beacon.url, tenant.account, again.id)).to.deep.include({ read: 7, queued: 7, delivered: 7 })
    expect(new Set(receiver.requests.map(r => r.headers['webhook-id'])).size).to.equal(14)
    const list = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/replays`)
    expect(list.body.replays.map((r: Replay) => r.id)).to.deep.equal([again.id, started.id])
  })

  it('skips the kinds the target does not take, and keeps at most BEACON_REPLAY_INFLIGHT_MAX unsettled while the target fails', async () => {
    await beacon.close()
    beacon = await startInProcess(undefined, { BEACON_REPLAY_INFLIGHT_MAX: '3' })
    tenant = await createTenant(beacon.url)
    const startMs = beacon.clock.nowMs()
    for (let i = 0; i < 10; i++) await send(visitorId(), { orderId: `o-${i}` })
    await send(visitorId(), { event: 'pageView', path: '/' })
    const failing = await startReceiver(() => ({ status: 503 }))
    try {
      expect((await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/webhooks/orders`, webhook(failing.url, ['purchase']))).status).to.equal(200)
      const started = await startReplay(beacon.url, tenant.account, { from: new Date(startMs).toISOString(), to: new Date(startMs + 1000).toISOString(), target: { webhook: 'orders' } })
      await until('three attempted', () => failing.requests.length >= 3)
      const held = await replayOf(beacon.url, tenant.account, started.id)
      expect(held.state).to.equal('running')
      expect(held.queued).to.equal(3)
      expect(held.inFlight).to.equal(3)
      expect(new Set(failing.requests.map(r => JSON.parse(r.body).order)).size).to.equal(3)
      // Cancelled: no more are queued; the ones queued go on with their retries.
      const cancelled = await admin(beacon.url, 'POST', `/admin/accounts/${tenant.account}/replays/${started.id}/cancel`)
      expect(cancelled.status, JSON.stringify(cancelled.body)).to.equal(200)
      expect(cancelled.body.state).to.equal('cancelled')
      const repeated = await admin(beacon.url, 'POST', `/admin/accounts/${tenant.account}/replays/${started.id}/cancel`)
      expect(repeated.status, 'a repeated cancel answers the replay as it is').to.equal(200)
      expect(repeated.body.state).to.equal('cancelled')
      // The receiver recovers: the three queued are delivered and counted, nothing more is sent.
      await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/webhooks/orders`, webhook(receiver.url, ['purchase']))
      const skipping = await startReplay(beacon.url, tenant.account, { from: new Date(startMs).toISOString(), to: new Date(startMs + 1000).toISOString(), target: { webhook: 'orders' } })
      await until('the second replay done', async () => (await replayOf(beacon.url, tenant.account, skipping.id)).state === 'done', 60_000)
      expect(await replayOf(beacon.url, tenant.account, skipping.id)).to.deep.include({ read: 11, queued: 10, skipped: 1, delivered: 10, failed: 0 })
    } finally {
      await failing.close()
    }
  })

  it('fails when its target is deleted meanwhile, counting what it had queued as failed', async () => {
    const startMs = beacon.clock.nowMs()
    for (let i = 0; i < 3; i++) await send(visitorId(), { orderId: `o-${i}` })
    const failing = await startReceiver(() => ({ status: 503 }))
    try {
      await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/webhooks/orders`, webhook(failing.url, ['purchase']))
      const started = await startReplay(beacon.url, tenant.account, { from: new Date(startMs).toISOString(), to: new Date(startMs + 1000).toISOString(), target: { webhook: 'orders' } })
      await until('attempted', () => failing.requests.length >= 1)
      expect((await admin(beacon.url, 'DELETE', `/admin/accounts/${tenant.account}/webhooks/orders`)).status).to.equal(200)
      await until('the replay failed', async () => (await replayOf(beacon.url, tenant.account, started.id)).state === 'failed')
      expect(await replayOf(beacon.url, tenant.account, started.id)).to.deep.include({ queued: 3, delivered: 0, failed: 3, inFlight: 0, error: 'The target was deleted.' })
    } finally {
      await failing.close()
    }
  })

  it('replays to a native destination, as the provider takes it', async () => {
    const meta = await new MetaCapiDouble(() => beacon.clock.nowMs()).start()
    try {
      const startMs = beacon.clock.nowMs()
      for (let i = 0; i < 3; i++) {
        await send(visitorId(), { orderId: `m-${i}`, orderTotal: 10 + i, currency: 'eur', userAgent: 'Mozilla/5.0 (test)', path: '/checkout/done', ...identified(tenant, `p-${i}`) })
      }
      const saved = await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/destinations/meta`, {
        type: 'meta-capi', name: 'Meta', enabled: true, events: ['purchase'], credentials: { accessToken: 'meta-token' },
        settings: { pixelId: '1234567890', apiBaseUrl: meta.url, siteUrl: 'https://shop.example' },
      })
      expect(saved.status, JSON.stringify(saved.body)).to.equal(200)
      const started = await startReplay(beacon.url, tenant.account, { from: new Date(startMs).toISOString(), to: new Date(startMs + 1000).toISOString(), target: { destination: 'meta' } })
      await until('the replay done', async () => (await replayOf(beacon.url, tenant.account, started.id)).state === 'done')
      expect(await replayOf(beacon.url, tenant.account, started.id)).to.deep.include({ queued: 3, delivered: 3, failed: 0 })
      expect(meta.events).to.have.length(3)
      const listed = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/destinations/meta/deliveries`)
      expect(listed.body.deliveries.every((d: { replay?: string }) => d.replay === started.id), JSON.stringify(listed.body.deliveries[0])).to.equal(true)
    } finally {
      await meta.close()
    }
  })

  it('refuses bad input with 400, an unknown account, target or replay with 404, an unsuitable target with 409; changes nothing', async () => {
    const path = `/admin/accounts/${tenant.account}/replays`
    const range = { from: '2026-01-01T00:00:00Z', to: '2026-01-02T00:00:00Z' }
    await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/webhooks/orders`, webhook(receiver.url))
    expectError(await admin(beacon.url, 'POST', path, { ...range }), 'invalid_field', '/target')
    expectError(await admin(beacon.url, 'POST', path, { ...range, target: { webhook: 'orders' }, extra: 1 }), 'unknown_field', '/extra')
    expectError(await admin(beacon.url, 'POST', path, { ...range, from: 'yesterday', target: { webhook: 'orders' } }), 'invalid_field', '/from')
    expectError(await admin(beacon.url, 'POST', path, { from: range.to, to: range.from, target: { webhook: 'orders' } }), 'invalid_field', '/from')
    expectError(await admin(beacon.url, 'POST', path, { ...range, target: { webhook: 'orders' }, kinds: [] }), 'invalid_field', '/kinds')
    expectError(await admin(beacon.url, 'POST', path, { ...range, target: { webhook: 'nope' } }), 'webhook_not_found')
    expectError(await admin(beacon.url, 'POST', path, { ...range, target: { destination: 'nope' } }), 'destination_not_found')
    expectError(await admin(beacon.url, 'POST', '/admin/accounts/00000000-0000-4000-8000-000000000000/replays', { ...range, target: { webhook: 'orders' } }), 'account_not_found')
    await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/webhooks/off`, { ...webhook(receiver.url), enabled: false })
    expectError(await admin(beacon.url, 'POST', path, { ...range, target: { webhook: 'off' } }), 'replay_target_refused', '/target')
    await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/webhooks/aud`, { ...webhook(receiver.url), trigger: { kind: 'audience', segments: ['vip'], on: ['enter'] } })
    expectError(await admin(beacon.url, 'POST', path, { ...range, target: { webhook: 'aud' } }), 'replay_target_refused', '/target')
    expectError(await admin(beacon.url, 'GET', `${path}/00000000-0000-4000-8000-000000000000`), 'replay_not_found')
    expectError(await admin(beacon.url, 'POST', `${path}/not-an-id/cancel`), 'replay_not_found')
    expect((await admin(beacon.url, 'GET', path)).body).to.deep.equal({ replays: [] })
    // Another account's replay is not found through this one.
    const other = await createTenant(beacon.url, 'Other')
    await admin(beacon.url, 'PUT', `/admin/accounts/${other.account}/webhooks/orders`, webhook(receiver.url))
    const theirs = await startReplay(beacon.url, other.account, { ...range, target: { webhook: 'orders' } })
    expectError(await admin(beacon.url, 'GET', `${path}/${theirs.id}`), 'replay_not_found')
  })

  it('answers 501 event_log_not_kept when no log is kept', async () => {
    await beacon.close()
    beacon = await startInProcess(undefined, { BEACON_EVENT_RETENTION_DAYS: '0' })
    tenant = await createTenant(beacon.url)
    expectError(await admin(beacon.url, 'POST', `/admin/accounts/${tenant.account}/replays`, { from: '2026-01-01T00:00:00Z', to: '2026-01-02T00:00:00Z', target: { webhook: 'orders' } }), 'event_log_not_kept')
    expectError(await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/replays`), 'event_log_not_kept')
  })
})

describe('a replay across a SIGKILL (real process)', () => {
  it('resumes where it stood: every event of the range delivered at least once, in order per visitor', async function () {
    this.timeout(180_000)
    // At most 5 unsettled at once: the kill comes in the middle of the replay.
    const receiver = await startReceiver()
    const env = { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true', BEACON_REPLAY_INFLIGHT_MAX: '5' }
    let beacon: BeaconProcess = await startBeacon({ env })
    try {
      const tenant = await createTenant(beacon.url)
      const visitors = Array.from({ length: 10 }, () => visitorId())
      const fromMs = Date.now() - 1000
      const total = 300
      // One at a time: each visitor's events are logged in the order of their numbers.
      for (let j = 0; j < total; j++) {
        const res = await post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: visitors[j % visitors.length], platform: 'web', event: 'purchase', orderId: `o-${j}` })
        expect(res.status).to.equal(200)
      }
      const toMs = Date.now() + 1000
      expect((await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/webhooks/orders`, webhook(receiver.url, ['purchase']))).status).to.equal(200)
      const started = await startReplay(beacon.url, tenant.account, { from: new Date(fromMs).toISOString(), to: new Date(toMs).toISOString(), target: { webhook: 'orders' } })
      await until('a third of it delivered', () => receiver.requests.length >= total / 3, 60_000)
      await beacon.kill()
      const atKill = receiver.requests.length
      expect(atKill, 'killed in the middle of the replay').to.be.below(total)
      beacon = await startBeacon({ dataDir: beacon.dataDir, env })
      await until('the replay done after the restart', async () => (await replayOf(beacon.url, tenant.account, started.id)).state === 'done', 120_000)
      const done = await replayOf(beacon.url, tenant.account, started.id)
      expect(done).to.deep.include({ read: total, queued: total, delivered: total, failed: 0, inFlight: 0 })
      const orders = receiver.requests.map(r => JSON.parse(r.body) as { order: string, visitor: string, replay: string })
      expect(orders.every(o => o.replay === started.id)).to.equal(true)
      expect(new Set(orders.map(o => o.order)).size).to.equal(total)
      // In order per visitor, apart from a repeat of what was in flight at the kill (at least once).
      for (const visitor of visitors) {
        const seen = orders.filter(o => o.visitor === visitor).map(o => Number(o.order.slice(2)))
        const firsts = seen.filter((n, at) => seen.indexOf(n) === at)
        expect(firsts, visitor).to.deep.equal([...firsts].sort((x, y) => x - y))
      }
    } finally {
      await beacon.kill()
      removeDir(beacon.dataDir)
      await receiver.close()
    }
  })
})
