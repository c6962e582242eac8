// Bulk imports (docs/events.md, "Bulk import"): an NDJSON body streamed to POST …/imports, applied as a
// job whose progress, refusals (with line numbers) and duplicates are read back; historical events go
// through the windows at their own time, into the event log with it, and fire no webhook; a second import
// of the same file counts its rows as duplicates; a job cut by a SIGKILL resumes at the next start and
// applies each row once. Real Beacon processes, real HTTP, real LMDB, a real webhook receiver.

import { expect } from 'chai'
import { ADMIN_KEY, admin, discardBeacon, post, startBeacon, startWithTenant, visitorId, type BeaconProcess, type Tenant } from '../helpers/beacon.js'
import { expectError } from '../helpers/errors.js'
import { until } from '../helpers/until.js'
import { startReceiver, type Receiver } from '../webhooks/helpers.js'

const DAY_MS = 86_400_000

interface Job { id: string, state: string, rowsRead: number, applied: number, duplicates: number, refused: number, refusals: Array<{ line: number, code: string, field?: string }>, bytes: number }

async function upload (base: string, account: string, body: string, query = ''): Promise<{ status: number, body: any }> {
  const res = await fetch(`${base}/admin/accounts/${account}/imports${query}`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/x-ndjson' }, body })
  return { status: res.status, body: await res.json() }
}

async function finished (base: string, account: string, id: string): Promise<Job> {
  let job: Job | null = null
  await until('the import to finish', async () => {
    const res = await admin(base, 'GET', `/admin/accounts/${account}/imports/${id}`)
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
    job = res.body
    return job!.state === 'done' || job!.state === 'failed'
  }, 120_000, 50)
  return job!
}

const lines = (rows: unknown[]): string => rows.map(row => typeof row === 'string' ? row : JSON.stringify(row)).join('\n') + '\n'

describe('bulk import (embedded, real process)', function () {
  this.timeout(180_000)
  let beacon: BeaconProcess
  let tenant: Tenant
  let receiver: Receiver

  before(async () => {
    receiver = await startReceiver()
    ;({ beacon, tenant } = await startWithTenant({ env: { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true', BEACON_IMPORT_MAX_BYTES: '200000' }, startTimeoutMs: 60_000 }))
    const base = `/admin/accounts/${tenant.account}`
    for (const [id, rule] of [['recent-buyers', { fact: 'count', event: 'purchase', within: '30d', op: 'gte', value: 1 }], ['buyers', { fact: 'count', event: 'purchase', op: 'gte', value: 1 }]] as const) {
      const put = await admin(beacon.url, 'PUT', `${base}/segments/${id}`, { rule })
      expect(put.status, JSON.stringify(put.body)).to.be.oneOf([200, 201])
    }
    const hook = await admin(beacon.url, 'PUT', `${base}/webhooks/orders`, {
      name: 'orders', enabled: true, trigger: { kind: 'event', events: ['purchase', 'attributesUpdated'] },
      request: { method: 'POST', url: `${receiver.url}/orders`, payload: '{"who": "{{visitorId}}", "event": "{{event}}"}' },
      delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1 },
    })
    expect(hook.status, JSON.stringify(hook.body)).to.be.oneOf([200, 201])
  })
  after(async () => {
    await discardBeacon(beacon)
    await receiver?.close()
  })

  const segmentsOf = async (visitor: string): Promise<string[]> => {
    const res = await post(beacon.url, '/visitors/query', { account: tenant.account, visitorId: visitor, token: tenant.token })
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
    return res.body.segments as string[]
  }

  it('applies each row type, dates events by their timestamp, refuses bad lines by number, fires nothing, and counts a second import as duplicates', async () => {
    const old = visitorId()
    const recent = visitorId()
    const linked = visitorId().toUpperCase()
    const nowMs = Date.now()
    const file = lines([
      { type: 'profile', profileId: 'ada', attributes: { plan: 'pro' } },
      { type: 'visitor', visitorId: old, attributes: { source: 'crm' } },
      { type: 'link', visitorId: linked, profileId: 'ada' },
      { type: 'event', visitorId: old, platform: 'web', event: 'purchase', orderId: 'o-old', orderTotal: 10, timestamp: new Date(nowMs - 40 * DAY_MS).toISOString() },
      { type: 'event', visitorId: recent, platform: 'web', event: 'purchase', orderId: 'o-new', orderTotal: 20, timestamp: new Date(nowMs - 2 * DAY_MS).toISOString(), messageId: 'm-1' },
      '',
      'not json',
      { type: 'order', visitorId: old },
      { type: 'event', visitorId: old, platform: 'web', event: 'noSuchType', timestamp: new Date(nowMs).toISOString() },
      { type: 'event', visitorId: old, platform: 'web', event: 'pageView', timestamp: new Date(nowMs + 2 * 3_600_000).toISOString() },
      { type: 'visitor', visitorId: 'not-a-uuid', attributes: { a: 1 } },
    ])
    const created = await upload(beacon.url, tenant.account, file)
    expect(created.status, JSON.stringify(created.body)).to.equal(202)
    expect(created.body.state).to.be.oneOf(['queued', 'running', 'done'])
    expect(created.body.bytes).to.equal(Buffer.byteLength(file))
    const job = await finished(beacon.url, tenant.account, created.body.id)
    expect(job.state).to.equal('done')
    expect(job.rowsRead).to.equal(11)
    expect(job.applied).to.equal(5)
    expect(job.duplicates).to.equal(0)
    expect(job.refused).to.equal(5)
    expect(job.refusals.map(r => [r.line, r.code])).to.deep.equal([
      [7, 'invalid_json'], [8, 'invalid_field'], [9, 'unknown_event_type'], [10, 'timestamp_out_of_range'], [11, 'invalid_field'],
    ])

    // A purchase 40 days old counts in no 30-day window, but all time; one 2 days old in both.
    expect(await segmentsOf(old)).to.include('buyers').and.not.include('recent-buyers')
    expect(await segmentsOf(recent)).to.include.members(['buyers', 'recent-buyers'])
    const linkedView = await post(beacon.url, '/visitors/query', { account: tenant.account, visitorId: linked, token: tenant.token })
    expect(linkedView.body.profileId).to.equal('ada')
    const profile = await post(beacon.url, '/profiles/query', { account: tenant.account, profileId: 'ada', token: tenant.token })
    expect(profile.status, JSON.stringify(profile.body)).to.equal(200)
    expect(JSON.stringify(profile.body.attributes)).to.include('pro')
    // The event log holds the events at their historical time.
    const logged = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/events?visitorId=${recent}`)
    expect(logged.body.events.map((e: { time: string }) => e.time)).to.deep.equal([new Date(nowMs - 2 * DAY_MS).toISOString()])

    // No webhook for the import: a live purchase afterwards is the first the receiver hears.
    const live = visitorId()
    expect((await post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: live, platform: 'web', event: 'purchase', orderId: 'o-live', orderTotal: 1 })).status).to.equal(200)
    await until('the live purchase delivered', () => receiver.requests.length > 0, 30_000)
    expect(receiver.requests.map(r => (JSON.parse(r.body) as { who: string }).who)).to.deep.equal([live])

    // The same file again: every applied row is a duplicate (the link has no claim: linking again changes nothing).
    const again = await upload(beacon.url, tenant.account, file)
    const second = await finished(beacon.url, tenant.account, again.body.id)
    expect([second.applied, second.duplicates, second.refused]).to.deep.equal([1, 4, 5])
    const list = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/imports`)
    expect(list.body.imports.map((j: Job) => j.id)).to.deep.equal([again.body.id, created.body.id])
    expect(receiver.requests).to.have.length(1)
  })

  it('fires webhooks for the imported rows with ?deliver=true', async () => {
    const visitor = visitorId()
    const created = await upload(beacon.url, tenant.account, lines([{ type: 'event', visitorId: visitor, platform: 'web', event: 'purchase', orderId: 'o-d', orderTotal: 5, timestamp: new Date(Date.now() - DAY_MS).toISOString() }]), '?deliver=true')
    expect(created.status, JSON.stringify(created.body)).to.equal(202)
    expect((await finished(beacon.url, tenant.account, created.body.id)).applied).to.equal(1)
    await until('the imported purchase delivered', () => receiver.requests.some(r => (JSON.parse(r.body) as { who: string }).who === visitor), 30_000)
  })

  it('refuses a bad upload with the right 4xx and records nothing', async () => {
    expectError(await upload(beacon.url, '00000000-0000-4000-8000-000000000000', lines([{ type: 'link' }])), 'account_not_found')
    expectError(await upload(beacon.url, tenant.account, lines([{ type: 'link' }]), '?deliver=maybe'), 'invalid_field')
    expectError(await upload(beacon.url, tenant.account, ''), 'invalid_field')
    // Over BEACON_IMPORT_MAX_BYTES (200000 here), streamed without a length: 413.
    const big = lines(Array.from({ length: 3000 }, () => ({ type: 'visitor', visitorId: visitorId(), attributes: { padding: 'x'.repeat(40) } })))
    const res = await fetch(`${beacon.url}/admin/accounts/${tenant.account}/imports`, {
      method: 'POST', headers: { authorization: `Bearer ${ADMIN_KEY}` }, duplex: 'half',
      body: (async function * () { for (let at = 0; at < big.length; at += 16384) yield Buffer.from(big.slice(at, at + 16384)) })(),
    } as RequestInit)
    expectError({ status: res.status, body: await res.json() }, 'body_too_large')
    expectError(await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/imports/00000000-0000-4000-8000-000000000000`), 'import_not_found')
    const list = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/imports`)
    expect(list.body.imports).to.have.length(3)
  })

  it('counts the rows their actors refuse (each messageId sent again with another body) and goes on serving', async () => {
    // 100 rows of 40 attributes: a step runs longer than IMPORT_TURN_MS and yields the event loop after
    // the refusals of its first rows have settled; they must be counted, never unhandled rejections.
    const visitors = Array.from({ length: 100 }, () => visitorId())
    const file = (value: string): string => lines(visitors.map((id, i) => ({
      type: 'visitor', visitorId: id, messageId: `reused-${i}`, attributes: Object.fromEntries(Array.from({ length: 40 }, (_, a) => [`a${a}`, `${value}-${a}`])),
    })))
    const first = await upload(beacon.url, tenant.account, file('first'))
    expect(first.status, JSON.stringify(first.body)).to.equal(202)
    expect((await finished(beacon.url, tenant.account, first.body.id)).applied).to.equal(100)
    const again = await upload(beacon.url, tenant.account, file('second'))
    expect(again.status, JSON.stringify(again.body)).to.equal(202)
    const job = await finished(beacon.url, tenant.account, again.body.id)
    expect([job.state, job.applied, job.refused], JSON.stringify(job)).to.deep.equal(['done', 0, 100])
    expect(job.refusals[0]).to.include({ line: 1, code: 'idempotency_key_reused' })
    expect(beacon.child.exitCode, 'the process is alive').to.equal(null)
    expect((await fetch(`${beacon.url}/healthz`)).status).to.equal(200)
  })
})

describe('bulk import across a restart (embedded, real processes)', function () {
  this.timeout(300_000)
  let beacon: BeaconProcess | undefined

  after(() => discardBeacon(beacon))

  it('resumes a job cut by SIGKILL from its last committed row and applies each row once', async () => {
    const started = await startWithTenant({ startTimeoutMs: 60_000 })
    beacon = started.beacon
    const { account } = started.tenant
    const total = 20_000
    const atMs = Date.now() - 3 * DAY_MS
    const file = lines(Array.from({ length: total }, (_, i) => ({ type: 'event', visitorId: visitorId(), platform: 'web', event: 'pageView', path: `/p/${i}`, timestamp: new Date(atMs + i).toISOString() })))
    const created = await upload(beacon.url, account, file)
    expect(created.status, JSON.stringify(created.body)).to.equal(202)
    let cut = 0
    await until('the import under way', async () => {
      const job = (await admin(beacon!.url, 'GET', `/admin/accounts/${account}/imports/${created.body.id}`)).body as Job
      cut = job.rowsRead
      return job.rowsRead > 0
    }, 120_000, 5)
    await beacon.kill()
    beacon = await startBeacon({ dataDir: beacon.dataDir, startTimeoutMs: 60_000 })
    const job = await finished(beacon.url, account, created.body.id)
    expect(job.state).to.equal('done')
    expect(job.rowsRead).to.equal(total)
    expect(job.applied + job.duplicates).to.equal(total)
    expect(cut).to.be.lessThan(total)
    // Each row once in the log, whatever the cut repeated.
    let logged = 0
    let cursor: string | null = null
    do {
      const page: { events: unknown[], next: string | null } = (await admin(beacon.url, 'GET', `/admin/accounts/${account}/events?limit=1000${cursor === null ? '' : `&cursor=${cursor}`}`)).body
      logged += page.events.length
      cursor = page.next
    } while (cursor !== null)
    expect(logged).to.equal(total)
  })
})
