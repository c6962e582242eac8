// Scheduled delivery of a saved report's result to a webhook (docs/reports.md, "Delivery to a webhook"):
// at each due time (daily or weekly, at a time of day in UTC) the result GET …/result answers is one
// delivery of the webhook (signed, retried); a webhook that cannot take it is refused at save time, and
// one deleted later leaves the run's error on the report; a restart neither repeats nor loses a run.
// An in-process Beacon on a manual clock, a real HTTP receiver, real LMDB.

import { expect } from 'chai'
import { Webhook } from 'standardwebhooks'
import { admin, createTenant, post, visitorId, type Tenant } from '../helpers/beacon.js'
import { startInProcess, type InProcess } from '../helpers/in-process.js'
import { expectError } from '../helpers/errors.js'
import { until } from '../helpers/until.js'
import { startReceiver, type Receiver, type Responder } from '../webhooks/helpers.js'

const SECRET = 'whsec_' + Buffer.from('0123456789abcdef0123456789abcdef').toString('base64')

describe('saved reports: scheduled delivery to a webhook', () => {
  let beacon: InProcess
  let tenant: Tenant
  let receiver: Receiver
  let base: string

  const start = async (respond?: Responder): Promise<void> => {
    receiver = await startReceiver(respond)
    // The manual clock starts on Monday 2026-01-05 at 12:00 UTC.
    beacon = await startInProcess(undefined, { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' })
    tenant = await createTenant(beacon.url)
    base = `/admin/accounts/${tenant.account}/saved-reports`
  }
  afterEach(async () => {
    await beacon?.close()
    await receiver?.close()
  })

  const putWebhook = (id: string, request: Record<string, unknown> = {}, enabled = true) => admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/webhooks/${id}`, {
    name: 'reports', enabled,
    trigger: { kind: 'event', events: ['purchase'] },
    request: { method: 'POST', url: `${receiver.url}/reports`, signingSecret: SECRET, ...request },
    delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1 },
  })
  const report = (delivery: Record<string, unknown>) => ({
    name: 'Visitors by platform', metric: { type: 'uniqueVisitors' }, breakdown: { by: 'platform' }, range: { lastDays: 7 }, granularity: 'day', delivery,
  })
  const send = async (platform: string): Promise<void> => {
    const res = await post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: visitorId(), platform, event: 'pageView' })
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
  }
  /** Move the clock to `iso` and run the schedules there. */
  const at = async (iso: string): Promise<void> => {
    const ms = Date.parse(iso)
    expect(ms, 'the clock only moves forward').to.be.at.least(beacon.clock.ms)
    beacon.clock.ms = ms
    await beacon.beacon.runSchedules()
  }
  const body = (i: number): Record<string, unknown> => JSON.parse(receiver.requests[i]!.body) as Record<string, unknown>

  it('sends the report\'s result, signed, at each daily time; the report shows its last run', async () => {
    await start()
    expect((await putWebhook('reports')).status).to.equal(200)
    await send('web')
    await send('ios')
    const created = await admin(beacon.url, 'POST', base, report({ webhook: 'reports', every: 'day', at: '09:30' }))
    expect(created.status, JSON.stringify(created.body)).to.equal(201)
    expect(created.body.delivery).to.deep.equal({ webhook: 'reports', every: 'day', at: '09:30' })
    expect(created.body).not.to.have.property('lastDelivery')
    const id = created.body.id as string

    await at('2026-01-06T09:29:59.000Z')
    expect(receiver.requests).to.have.length(0)
    await at('2026-01-06T09:30:00.000Z')
    await until('the first delivery', () => receiver.requests.length === 1)
    const result = await admin(beacon.url, 'GET', `${base}/${id}/result`)
    expect(body(0)).to.deep.equal(result.body)
    expect(body(0)).to.deep.include({ id, name: 'Visitors by platform' })
    const request = receiver.requests[0]!
    const headers = request.headers as Record<string, string>
    expect(headers['webhook-signature']).to.equal(new Webhook(SECRET).sign(headers['webhook-id']!, new Date(Number(headers['webhook-timestamp']) * 1000), request.body))
    const read = await admin(beacon.url, 'GET', `${base}/${id}`)
    expect(read.body.lastDelivery).to.deep.equal({ at: '2026-01-06T09:30:00.000Z', status: 'queued', deliveryId: headers['webhook-id'] })
    const listed = await admin(beacon.url, 'GET', base)
    expect(listed.body.savedReports[0].lastDelivery).to.deep.equal(read.body.lastDelivery)

    // Not again the same day; the next day's run carries that day's result.
    await send('android')
    await at('2026-01-07T09:29:00.000Z')
    expect(receiver.requests).to.have.length(1)
    await at('2026-01-07T09:31:00.000Z')
    await until('the second delivery', () => receiver.requests.length === 2)
    expect((body(1).totals as { group: string }[]).map(t => t.group).sort()).to.deep.equal(['android', 'ios', 'web'])
    const delivered = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/webhooks/reports/deliveries?status=delivered`)
    expect(delivered.body.deliveries.map((d: { id: string }) => d.id).sort()).to.deep.equal(receiver.requests.map(r => r.headers['webhook-id']).sort())
  })

  it('sends a weekly report on its weekday only', async () => {
    await start()
    await putWebhook('reports')
    const id = (await admin(beacon.url, 'POST', base, report({ webhook: 'reports', every: 'week', weekday: 'thursday', at: '06:00' }))).body.id as string
    const runs: string[] = []
    for (let day = 6; day <= 19; day++) {
      await at(`2026-01-${String(day).padStart(2, '0')}T07:00:00.000Z`)
      const last = (await admin(beacon.url, 'GET', `${base}/${id}`)).body.lastDelivery as { at: string } | undefined
      if (last !== undefined && runs.at(-1) !== last.at) runs.push(last.at)
    }
    expect(runs).to.deep.equal(['2026-01-08T06:00:00.000Z', '2026-01-15T06:00:00.000Z'])
    await until('the deliveries', () => receiver.requests.length === 2)
  })

  it('follows a replaced schedule from the replacement on, and stops with the report\'s delivery or the report', async () => {
    await start()
    await putWebhook('reports')
    const definition = report({ webhook: 'reports', every: 'day', at: '20:00' })
    const id = (await admin(beacon.url, 'POST', base, definition)).body.id as string
    await at('2026-01-05T13:00:00.000Z')
    expect((await admin(beacon.url, 'PUT', `${base}/${id}`, { ...definition, delivery: { webhook: 'reports', every: 'day', at: '14:00' } })).status).to.equal(200)
    await at('2026-01-05T14:00:00.000Z')
    const read = await admin(beacon.url, 'GET', `${base}/${id}`)
    expect(read.body.lastDelivery).to.include({ at: '2026-01-05T14:00:00.000Z', status: 'queued' })
    await at('2026-01-05T20:00:00.000Z')
    const { delivery: _none, ...plain } = definition
    expect((await admin(beacon.url, 'PUT', `${base}/${id}`, plain)).status).to.equal(200)
    await at('2026-01-06T14:00:00.000Z')
    expect((await admin(beacon.url, 'PUT', `${base}/${id}`, definition)).status).to.equal(200)
    expect((await admin(beacon.url, 'DELETE', `${base}/${id}`)).status).to.equal(200)
    await at('2026-01-07T20:00:00.000Z')
    const listed = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/webhooks/reports/deliveries`)
    expect(listed.body.deliveries).to.have.length(1)
    await until('the one delivery', () => receiver.requests.length === 1)
  })

  it('retries a delivery the receiver failed, under the same webhook-id', async () => {
    await start((_request, index) => ({ status: index === 0 ? 503 : 200 }))
    await putWebhook('reports')
    await admin(beacon.url, 'POST', base, report({ webhook: 'reports', every: 'day' }))
    await at('2026-01-06T00:00:00.000Z')
    await until('the first attempt', () => receiver.requests.length === 1)
    await until('the retry', async () => {
      beacon.clock.advance(60_000)
      return receiver.requests.length === 2
    })
    expect(receiver.requests[1]!.headers['webhook-id']).to.equal(receiver.requests[0]!.headers['webhook-id'])
    expect(receiver.requests[1]!.body).to.equal(receiver.requests[0]!.body)
  })

  it('refuses a delivery to a webhook that is missing, disabled or sends no body, and a malformed schedule; nothing is saved', async () => {
    await start()
    await putWebhook('off', {}, false)
    await putWebhook('get', { method: 'GET' })
    expectError(await admin(beacon.url, 'POST', base, report({ webhook: 'nope', every: 'day' })), 'report_webhook_unusable', '/delivery/webhook')
    expectError(await admin(beacon.url, 'POST', base, report({ webhook: 'off', every: 'day' })), 'report_webhook_unusable', '/delivery/webhook')
    expectError(await admin(beacon.url, 'POST', base, report({ webhook: 'get', every: 'day' })), 'report_webhook_unusable', '/delivery/webhook')
    expectError(await admin(beacon.url, 'POST', base, report({ webhook: 'get', every: 'day', weekday: 'monday' })), 'invalid_field', '/delivery/weekday')
    for (const bad of [{ webhook: 'off', every: 'month' }, { webhook: 'off', every: 'day', at: '24:00' }, { webhook: 'off', every: 'day', at: '9:30' }, { webhook: 'off', every: 'week', weekday: 'mon' }, { every: 'day' }, { webhook: 'off', every: 'day', extra: 1 }]) {
      const res = await admin(beacon.url, 'POST', base, report(bad))
      expect(res.status, JSON.stringify(bad)).to.equal(400)
    }
    expect((await admin(beacon.url, 'GET', base)).body.savedReports).to.deep.equal([])
    // A replacement is checked the same way, and leaves the report as it was.
    const { delivery: _none, ...plain } = report({})
    const created = await admin(beacon.url, 'POST', base, plain)
    expect(created.status, JSON.stringify(created.body)).to.equal(201)
    const id = created.body.id as string
    expectError(await admin(beacon.url, 'PUT', `${base}/${id}`, report({ webhook: 'off', every: 'day' })), 'report_webhook_unusable', '/delivery/webhook')
    expect((await admin(beacon.url, 'GET', `${base}/${id}`)).body).to.deep.equal(created.body)
  })

  it('records on the report a run whose webhook was deleted since, and sends nothing', async () => {
    await start()
    await putWebhook('reports')
    const id = (await admin(beacon.url, 'POST', base, report({ webhook: 'reports', every: 'day', at: '18:00' }))).body.id as string
    expect((await admin(beacon.url, 'DELETE', `/admin/accounts/${tenant.account}/webhooks/reports`)).status).to.equal(200)
    await at('2026-01-05T18:00:00.000Z')
    const read = await admin(beacon.url, 'GET', `${base}/${id}`)
    expect(read.body.lastDelivery).to.deep.equal({ at: '2026-01-05T18:00:00.000Z', status: 'failed', error: 'The webhook reports no longer exists.' })
    // Put back, the next run goes out again.
    await putWebhook('reports')
    await at('2026-01-06T18:00:00.000Z')
    await until('the delivery', () => receiver.requests.length === 1)
    expect((await admin(beacon.url, 'GET', `${base}/${id}`)).body.lastDelivery).to.include({ at: '2026-01-06T18:00:00.000Z', status: 'queued' })
  })

  it('neither repeats a run across a restart nor loses one due while stopped', async () => {
    await start()
    await putWebhook('reports')
    const id = (await admin(beacon.url, 'POST', base, report({ webhook: 'reports', every: 'day', at: '13:00' }))).body.id as string
    await at('2026-01-05T13:00:00.000Z')
    await until('the first run', () => receiver.requests.length === 1)
    const restart = async (): Promise<void> => {
      const { dataDir, clock } = beacon
      await beacon.beacon.stop()
      beacon = await startInProcess(dataDir, { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' }, clock)
    }
    await restart()
    await at('2026-01-05T20:00:00.000Z')
    // The run of the 6th falls while stopped: made once, at the start after it.
    await beacon.beacon.stop()
    beacon.clock.ms = Date.parse('2026-01-06T15:00:00.000Z')
    beacon = await startInProcess(beacon.dataDir, { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' }, beacon.clock)
    await beacon.beacon.runSchedules()
    await until('the run made after the start', () => receiver.requests.length === 2)
    await restart()
    await at('2026-01-06T16:00:00.000Z')
    await at('2026-01-06T23:59:00.000Z')
    // Give a wrongly repeated delivery every chance to arrive before counting.
    const delivered = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/webhooks/reports/deliveries`)
    expect(delivered.body.deliveries).to.have.length(2)
    expect(receiver.requests).to.have.length(2)
    expect((await admin(beacon.url, 'GET', `${base}/${id}`)).body.lastDelivery).to.include({ at: '2026-01-06T13:00:00.000Z', status: 'queued' })
  })
})
