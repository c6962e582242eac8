// The retained event log (docs/event-log.md): every accepted event appended with the state write that
// applied it, read back newest first through the admin API, trimmed to its retention and size cap,
// scrubbed by erasure, exported as NDJSON. An in-process Beacon on a manual clock, real HTTP, real LMDB.

import { expect } from 'chai'
import { admin, createTenant, identified, post, tempDir, visitorId, type Tenant } from '../helpers/beacon.js'
import { startInProcess, type InProcess } from '../helpers/in-process.js'
import { expectError } from '../helpers/errors.js'
import { addUser, asUser, signIn } from '../helpers/panel.js'
import { until } from '../helpers/until.js'
import { EVENT_CAP_STEP_MS, EVENT_SCAN_MAX } from '../../src/store/event-log.js'

const DAY_MS = 86_400_000

interface Logged { id: string, time: string, visitorId: string, profileId?: string, kind: string, fields: Record<string, unknown> }

describe('the retained event log', () => {
  let beacon: InProcess
  let tenant: Tenant
  beforeEach(async () => {
    beacon = await startInProcess()
    tenant = await createTenant(beacon.url)
  })
  afterEach(() => beacon.close())

  const send = (visitor: string, fields: Record<string, unknown> = {}, headers: Record<string, string> = {}) =>
    post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: visitor, platform: 'web', event: 'pageView', ...fields }, { headers })
  const read = async (query = ''): Promise<{ events: Logged[], next: string | null }> => {
    const res = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/events${query}`)
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
    return res.body
  }
  /** Every event of the query, following `next`. */
  const readAll = async (query: string): Promise<Logged[]> => {
    const all: Logged[] = []
    let cursor: string | null = null
    do {
      const page = await read(`?${query}${cursor === null ? '' : `&cursor=${cursor}`}`)
      all.push(...page.events)
      cursor = page.next
    } while (cursor !== null)
    return all
  }

  it('appends each accepted event with its visitor, profile, kind, fields and server time, never its token or signature', async () => {
    const anon = visitorId()
    const known = visitorId()
    expect((await send(anon, { path: '/shoes', token: tenant.token })).status).to.equal(200)
    beacon.clock.advance(1000)
    expect((await send(known, { event: 'purchase', orderId: 'o-1', orderTotal: 42, ...identified(tenant, 'pat') })).status).to.equal(200)
    // Refused: not accepted, not logged.
    expect((await send(anon, { event: 'noSuchType' })).status).to.equal(400)
    const { events, next } = await read()
    expect(next).to.equal(null)
    expect(events.map(e => ({ ...e, id: undefined }))).to.deep.equal([
      { id: undefined, time: new Date(beacon.clock.ms).toISOString(), visitorId: known, profileId: 'pat', kind: 'purchase', fields: { platform: 'web', orderId: 'o-1', orderTotal: 42 } },
      { id: undefined, time: new Date(beacon.clock.ms - 1000).toISOString(), visitorId: anon, kind: 'pageView', fields: { platform: 'web', path: '/shoes' } },
    ])
    // Another account's log holds none of them.
    const other = await createTenant(beacon.url, 'Other')
    expect((await admin(beacon.url, 'GET', `/admin/accounts/${other.account}/events`)).body).to.deep.equal({ events: [], next: null })
  })

  it('logs a retry with the same Idempotency-Key once', async () => {
    const visitor = visitorId()
    for (let i = 0; i < 2; i++) expect((await send(visitor, { event: 'purchase', orderId: 'o-9' }, { 'idempotency-key': 'k-1' })).status).to.equal(200)
    expect((await read()).events).to.have.length(1)
  })

  it('keeps what it answered 200 for across a restart (written with the state)', async () => {
    const visitor = visitorId()
    for (let i = 0; i < 3; i++) expect((await send(visitor, { path: `/p${i}` })).status).to.equal(200)
    const { dataDir, clock } = beacon
    await beacon.beacon.stop()
    beacon = await startInProcess(dataDir, {}, clock)
    expect((await read()).events.map(e => e.fields.path)).to.deep.equal(['/p2', '/p1', '/p0'])
  })

  it('pages newest first and filters by time range, visitor, profile and kind', async () => {
    const a = visitorId()
    const b = visitorId()
    const startMs = beacon.clock.ms
    for (let i = 0; i < 10; i++) {
      expect((await send(i % 2 === 0 ? a : b, { ...(i % 3 === 0 ? { event: 'productView', sku: `sku-${i}` } : {}), path: `/${i}`, ...(i >= 8 ? identified(tenant, 'sam') : {}) })).status).to.equal(200)
      beacon.clock.advance(60_000)
    }
    const paths = (events: Logged[]): unknown[] => events.map(e => e.fields.path)
    const first = await read('?limit=4')
    expect(paths(first.events)).to.deep.equal(['/9', '/8', '/7', '/6'])
    expect(first.next).to.be.a('string')
    expect(paths(await readAll('limit=3'))).to.deep.equal(['/9', '/8', '/7', '/6', '/5', '/4', '/3', '/2', '/1', '/0'])
    const iso = (ms: number): string => encodeURIComponent(new Date(ms).toISOString())
    // [from, to): from inclusive, to exclusive.
    expect(paths(await readAll(`from=${iso(startMs + 2 * 60_000)}&to=${iso(startMs + 5 * 60_000)}&limit=2`))).to.deep.equal(['/4', '/3', '/2'])
    expect(paths(await readAll(`visitorId=${a.toUpperCase()}`))).to.deep.equal(['/8', '/6', '/4', '/2', '/0'])
    expect(paths(await readAll('kind=productView'))).to.deep.equal(['/9', '/6', '/3', '/0'])
    expect(paths(await readAll('profileId=sam'))).to.deep.equal(['/9', '/8'])
    expect(paths(await readAll(`kind=productView&visitorId=${b}`))).to.deep.equal(['/9', '/3'])
  })

  it('refuses bad parameters with 400 naming each', async () => {
    const base = `/admin/accounts/${tenant.account}/events`
    for (const [query, field] of [
      ['from=yesterday', '/from'], ['to=2026-13-45T00:00:00Z', '/to'], ['from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z', '/from'],
      ['visitorId=not-a-uuid', '/visitorId'], ['kind=a%20b', '/kind'], ['limit=0', '/limit'], ['limit=1001', '/limit'], ['cursor=abc', '/cursor'],
      ['profileId=' + 'x'.repeat(300), '/profileId'],
    ] as const) {
      const res = await admin(beacon.url, 'GET', `${base}?${query}`)
      expectError(res, 'invalid_field', field)
    }
    expectError(await admin(beacon.url, 'GET', `${base}/export?from=nope`), 'invalid_field', '/from')
    expectError(await admin(beacon.url, 'GET', '/admin/accounts/6f1c2d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f/events'), 'account_not_found')
    expect((await admin(beacon.url, 'GET', base, undefined, 'wrong-key')).status).to.equal(401)
  })

  it('lets a viewer read the log, only an owner export it, and no one another account\'s', async () => {
    expect((await send(visitorId())).status).to.equal(200)
    const cookieOf = async (email: string, role: string, account = tenant.account): Promise<string> => {
      await addUser(beacon.url, account, email, role)
      return (await signIn(beacon.url, email)).signedIn!.cookie
    }
    const viewer = await cookieOf('vi@example.com', 'viewer')
    const owner = await cookieOf('ow@example.com', 'owner')
    const base = `/admin/accounts/${tenant.account}/events`
    expect((await asUser(beacon.url, viewer, 'GET', base)).body.events).to.have.length(1)
    expectError(await asUser(beacon.url, viewer, 'GET', `${base}/export`), 'role_forbidden')
    const exported = await asUser(beacon.url, owner, 'GET', `${base}/export`)
    expect(exported.status).to.equal(200)
    expect(String(exported.body).trim().split('\n')).to.have.length(1)
    const other = await createTenant(beacon.url, 'Other')
    const outsider = await cookieOf('out@example.com', 'owner', other.account)
    expectError(await asUser(beacon.url, outsider, 'GET', base), 'role_forbidden')
  })

  it('empties the deleted account\'s log with the rest of its data', async () => {
    for (let i = 0; i < 3; i++) expect((await send(visitorId())).status).to.equal(200)
    const other = await createTenant(beacon.url, 'Other')
    expect((await post(beacon.url, '/campaigns/query', { account: other.account, visitorId: visitorId(), platform: 'web', event: 'pageView' })).status).to.equal(200)
    expect(beacon.beacon.events!.count()).to.equal(4)
    expect((await admin(beacon.url, 'DELETE', `/admin/accounts/${tenant.account}`)).status).to.equal(202)
    await until('the deletion done', async () => (await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/deletion`)).body.state === 'done')
    const job = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/deletion`)
    expect(job.body.removed.events).to.equal(3)
    expect(beacon.beacon.events!.count()).to.equal(1)
    expect((await admin(beacon.url, 'GET', `/admin/accounts/${other.account}/events`)).body.events).to.have.length(1)
  })

  it('trims events past BEACON_EVENT_RETENTION_DAYS and keeps the rest', async () => {
    await beacon.close()
    beacon = await startInProcess(tempDir(), { BEACON_EVENT_RETENTION_DAYS: '2' })
    tenant = await createTenant(beacon.url)
    const visitor = visitorId()
    for (let day = 0; day < 4; day++) {
      expect((await send(visitor, { path: `/day${day}` })).status).to.equal(200)
      beacon.clock.advance(DAY_MS)
    }
    // Now: 4 days after the first. Kept: the last 2 days (day 2 at exactly 2 days old, day 3).
    expect(await beacon.beacon.events!.trimAll(beacon.clock.ms)).to.equal(2)
    expect((await read()).events.map(e => e.fields.path)).to.deep.equal(['/day3', '/day2'])
    expect(await beacon.beacon.events!.trimAll(beacon.clock.ms)).to.equal(0)
  })

  it('trims the oldest events first past BEACON_EVENT_LOG_MAX_BYTES', async () => {
    await beacon.close()
    const capBytes = 8 * 4096
    beacon = await startInProcess(tempDir(), { BEACON_EVENT_LOG_MAX_BYTES: String(capBytes) })
    tenant = await createTenant(beacon.url)
    const log = beacon.beacon.events!
    const filler = 'x'.repeat(1500)
    const sent = 60
    for (let i = 0; i < sent; i++) {
      expect((await send(visitorId(), { path: `/${i}`, referrer: `https://example.com/${filler}` })).status).to.equal(200)
      beacon.clock.advance(EVENT_CAP_STEP_MS)
    }
    expect(log.sizeBytes()).to.be.above(capBytes)
    const removed = await log.trimAll(beacon.clock.ms)
    expect(removed).to.be.above(0)
    expect(log.sizeBytes()).to.be.at.most(capBytes)
    // What is left is the newest, without a gap.
    const left = (await readAll('limit=1000')).map(e => e.fields.path)
    expect(left).to.have.length(sent - removed)
    expect(left).to.deep.equal(Array.from({ length: left.length }, (_, i) => `/${sent - 1 - i}`))
  })

  it('loses the events of an erased visitor, and of an erased person (its devices, and what it sent from a device kept)', async () => {
    const anon = visitorId()
    const bystander = visitorId()
    const phone = visitorId()
    const laptop = visitorId()
    expect((await send(anon, { path: '/a' })).status).to.equal(200)
    expect((await send(bystander, { path: '/b' })).status).to.equal(200)
    expect((await send(phone, { path: '/phone', ...identified(tenant, 'kim') })).status).to.equal(200)
    expect((await send(laptop, { path: '/laptop-kim', ...identified(tenant, 'kim') })).status).to.equal(200)
    // The laptop moves to another person: kept by the erasure, with the events it sent as that person.
    expect((await send(laptop, { path: '/laptop-lee', ...identified(tenant, 'lee') })).status).to.equal(200)
    expect((await admin(beacon.url, 'DELETE', `/admin/accounts/${tenant.account}/visitors/${anon}`)).status).to.equal(200)
    expect(await readAll(`visitorId=${anon}`)).to.deep.equal([])
    const erased = await admin(beacon.url, 'DELETE', `/admin/accounts/${tenant.account}/profiles/kim`)
    expect(erased.status, JSON.stringify(erased.body)).to.equal(200)
    expect(erased.body.keptVisitors).to.equal(1)
    expect(await readAll('profileId=kim')).to.deep.equal([])
    expect(await readAll(`visitorId=${phone}`)).to.deep.equal([])
    expect((await readAll('limit=100')).map(e => e.fields.path)).to.deep.equal(['/laptop-lee', '/b'])
  })

  it('keeps none with BEACON_EVENT_RETENTION_DAYS=0: events still accepted, both endpoints 501 event_log_not_kept', async () => {
    await beacon.close()
    beacon = await startInProcess(tempDir(), { BEACON_EVENT_RETENTION_DAYS: '0' })
    tenant = await createTenant(beacon.url)
    expect((await send(visitorId())).status).to.equal(200)
    expect(beacon.beacon.events).to.equal(null)
    expectError(await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/events`), 'event_log_not_kept')
    expectError(await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/events/export`), 'event_log_not_kept')
  })

  it('exports a range as NDJSON, oldest first, streamed', async () => {
    const a = visitorId()
    for (let i = 0; i < 25; i++) {
      expect((await send(i % 5 === 0 ? a : visitorId(), { path: `/${i}` })).status).to.equal(200)
      beacon.clock.advance(1000)
    }
    const res = await fetch(`${beacon.url}/admin/accounts/${tenant.account}/events/export`, { headers: { authorization: 'Bearer test-admin-key-0123456789' } })
    expect(res.status).to.equal(200)
    expect(res.headers.get('content-type')).to.equal('application/x-ndjson')
    const lines = (await res.text()).split('\n')
    expect(lines.pop()).to.equal('')
    const events = lines.map(line => JSON.parse(line) as Logged)
    expect(events.map(e => e.fields.path)).to.deep.equal(Array.from({ length: 25 }, (_, i) => `/${i}`))
    expect(events).to.deep.equal([...await readAll('limit=7')].reverse())
    const filtered = await fetch(`${beacon.url}/admin/accounts/${tenant.account}/events/export?visitorId=${a}&from=${encodeURIComponent(new Date(beacon.clock.ms - 20_000).toISOString())}`, { headers: { authorization: 'Bearer test-admin-key-0123456789' } })
    expect((await filtered.text()).trim().split('\n').map(line => (JSON.parse(line) as Logged).fields.path)).to.deep.equal(['/5', '/10', '/15', '/20'])
  })

  it('streams an export longer than one read step with backpressure, and stops it when the client goes away', async () => {
    const log = beacon.beacon.events!
    const total = EVENT_SCAN_MAX + 5000
    const visitor = visitorId()
    const padding = 'p'.repeat(200)
    for (let i = 0; i < total; i++) log.append(tenant.account, visitor, null, { event: 'pageView', platform: 'web', path: `/${i}`, padding }, beacon.clock.ms + i, [])
    await beacon.beacon.store.events.committed
    const url = `${beacon.url}/admin/accounts/${tenant.account}/events/export`
    const headers = { authorization: 'Bearer test-admin-key-0123456789' }
    // Read slowly at first, so the server's writes meet a full socket.
    const res = await fetch(url, { headers })
    const reader = res.body!.getReader()
    await new Promise(resolve => setTimeout(resolve, 200))
    let text = ''
    const decoder = new TextDecoder()
    for (let chunk = await reader.read(); chunk.done !== true; chunk = await reader.read()) text += decoder.decode(chunk.value, { stream: true })
    const lines = text.trim().split('\n')
    expect(lines).to.have.length(total)
    expect((JSON.parse(lines[0]!) as Logged).fields.path).to.equal('/0')
    expect((JSON.parse(lines[total - 1]!) as Logged).fields.path).to.equal(`/${total - 1}`)
    // A client that leaves after the first bytes: the server frees the request (it still answers, and stops cleanly).
    const controller = new AbortController()
    const cut = await fetch(url, { headers, signal: controller.signal })
    await cut.body!.getReader().read()
    controller.abort()
    expect((await read('?limit=1')).events).to.have.length(1)
  })
})
