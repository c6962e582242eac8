// Saved reports (docs/reports.md): definitions kept per account through the admin API, role-checked,
// validated; results computed exactly from the retained event log (metrics, breakdowns, filters,
// buckets, CSV), in step with erasure, retention and a restart. An in-process Beacon on a manual
// clock, real HTTP, real LMDB.

import { expect } from 'chai'
import { ADMIN_KEY, admin, createTenant, identified, post, tempDir, visitorId, type Tenant } from '../helpers/beacon.js'
import { startInProcess, type InProcess } from '../helpers/in-process.js'
import { expectError } from '../helpers/errors.js'
import { addUser, asUser, signIn } from '../helpers/panel.js'

const HOUR_MS = 3_600_000
const DAY_MS = 24 * HOUR_MS

interface Row { bucket: string, group: string | null, value: number, started?: number, converted?: number }

describe('saved reports', () => {
  let beacon: InProcess
  let tenant: Tenant
  let base: string
  beforeEach(async () => {
    beacon = await startInProcess()
    tenant = await createTenant(beacon.url)
    base = `/admin/accounts/${tenant.account}/saved-reports`
  })
  afterEach(() => beacon.close())

  const send = async (visitor: string, fields: Record<string, unknown> = {}): Promise<void> => {
    const res = await post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: visitor, platform: 'web', event: 'pageView', ...fields })
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
  }
  /** A range of whole days around the test's events: from the start of the day the clock is in. */
  const days = (count: number): { from: string, to: string } => {
    const start = Math.floor(beacon.clock.ms / DAY_MS) * DAY_MS
    return { from: new Date(start).toISOString(), to: new Date(start + count * DAY_MS).toISOString() }
  }
  const preview = async (definition: Record<string, unknown>): Promise<{ rows: Row[], totals: Row[], eventsRead: number, groupsOmitted: number, groupsOverlap: boolean }> => {
    const res = await admin(beacon.url, 'POST', `${base}-preview`, { name: 'preview', range: days(1), granularity: 'day', ...definition })
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
    return res.body
  }
  const totals = async (definition: Record<string, unknown>): Promise<Record<string, number>> =>
    Object.fromEntries((await preview(definition)).totals.map(t => [String(t.group), t.value]))

  describe('definitions (CRUD)', () => {
    const definition = { name: 'Buyers', metric: { type: 'uniqueVisitors' }, filters: [{ by: 'kind', values: ['purchase'] }], range: { lastDays: 7 }, granularity: 'day' }

    it('creates, lists, reads, replaces and deletes a report; other accounts see none of it', async () => {
      const created = await admin(beacon.url, 'POST', base, definition)
      expect(created.status, JSON.stringify(created.body)).to.equal(201)
      const id = created.body.id as string
      expect(created.body).to.deep.include(definition)
      expect(created.body.createdAt).to.equal(new Date(beacon.clock.ms).toISOString())
      expect((await admin(beacon.url, 'GET', base)).body).to.deep.equal({ savedReports: [created.body], next: null })
      expect((await admin(beacon.url, 'GET', `${base}/${id}`)).body).to.deep.equal(created.body)
      beacon.clock.advance(1000)
      const replaced = await admin(beacon.url, 'PUT', `${base}/${id}`, { ...definition, name: 'Buyers (week)', granularity: 'week' })
      expect(replaced.status, JSON.stringify(replaced.body)).to.equal(200)
      expect(replaced.body).to.deep.include({ id, name: 'Buyers (week)', granularity: 'week', createdAt: created.body.createdAt, updatedAt: new Date(beacon.clock.ms).toISOString() })
      const other = await createTenant(beacon.url, 'Other')
      expectError(await admin(beacon.url, 'GET', `/admin/accounts/${other.account}/saved-reports/${id}`), 'saved_report_not_found')
      expect((await admin(beacon.url, 'DELETE', `${base}/${id}`)).body).to.deep.equal({ id, deleted: true })
      expectError(await admin(beacon.url, 'GET', `${base}/${id}`), 'saved_report_not_found')
      expectError(await admin(beacon.url, 'GET', `${base}/${id}/result`), 'saved_report_not_found')
      expectError(await admin(beacon.url, 'DELETE', `${base}/${id}`), 'saved_report_not_found')
    })

    it('keeps saved reports across a restart', async () => {
      const created = await admin(beacon.url, 'POST', base, definition)
      const { dataDir, clock } = beacon
      await beacon.beacon.stop()
      beacon = await startInProcess(dataDir, {}, clock)
      expect((await admin(beacon.url, 'GET', `${base}/${created.body.id as string}`)).body).to.deep.equal(created.body)
    })

    it('lets viewers read and compute, editors and owners change', async () => {
      const id = (await admin(beacon.url, 'POST', base, definition)).body.id as string
      await addUser(beacon.url, tenant.account, 'viewer@example.com', 'viewer')
      await addUser(beacon.url, tenant.account, 'editor@example.com', 'editor')
      const viewer = (await signIn(beacon.url, 'viewer@example.com')).signedIn!.cookie
      const editor = (await signIn(beacon.url, 'editor@example.com')).signedIn!.cookie
      expect((await asUser(beacon.url, viewer, 'GET', base)).status).to.equal(200)
      expect((await asUser(beacon.url, viewer, 'GET', `${base}/${id}/result`)).status).to.equal(200)
      expect((await asUser(beacon.url, viewer, 'POST', `${base}-preview`, definition)).status).to.equal(200)
      expectError(await asUser(beacon.url, viewer, 'POST', base, definition), 'role_forbidden')
      expectError(await asUser(beacon.url, viewer, 'PUT', `${base}/${id}`, definition), 'role_forbidden')
      expectError(await asUser(beacon.url, viewer, 'DELETE', `${base}/${id}`), 'role_forbidden')
      expect((await asUser(beacon.url, editor, 'PUT', `${base}/${id}`, { ...definition, name: 'By editor' })).status).to.equal(200)
      expect((await asUser(beacon.url, editor, 'POST', base, definition)).status).to.equal(201)
      expect((await asUser(beacon.url, editor, 'DELETE', `${base}/${id}`)).status).to.equal(200)
    })

    it('refuses a bad definition with a 400 naming the field, and saves nothing', async () => {
      const bad: Array<[Record<string, unknown>, string]> = [
        [{ ...definition, metric: { type: 'median' } }, '/metric'],
        [{ ...definition, metric: { type: 'sum' } }, '/metric'],
        [{ ...definition, metric: { type: 'conversion', from: 'productView', to: 'productView', windowHours: 24 } }, '/metric/to'],
        [{ ...definition, metric: { type: 'conversion', from: 'productView', to: 'purchase', windowHours: 0 } }, '/metric'],
        [{ ...definition, breakdown: { by: 'field' } }, '/breakdown/field'],
        [{ ...definition, breakdown: { by: 'kind', field: 'plan' } }, '/breakdown/field'],
        [{ ...definition, breakdown: { by: 'country' } }, '/breakdown/by'],
        [{ ...definition, filters: [{ by: 'kind', values: [] }] }, '/filters/0/values'],
        [{ ...definition, range: { lastDays: 0 } }, '/range/lastDays'],
        [{ ...definition, range: { from: '2026-02-01T00:00:00Z', to: '2026-01-01T00:00:00Z' } }, '/range/from'],
        [{ ...definition, range: { lastDays: 60 }, granularity: 'hour' }, '/granularity'],
        [{ ...definition, granularity: 'month' }, '/granularity'],
        [{ ...definition, colour: 'red' }, '/colour'],
        [{ ...definition, name: '' }, '/name'],
      ]
      for (const [body, field] of bad) {
        const res = await admin(beacon.url, 'POST', base, body)
        expect(res.status, `${JSON.stringify(body)} → ${JSON.stringify(res.body)}`).to.equal(400)
        expect(res.body.errors.map((e: { field?: string }) => e.field), JSON.stringify(res.body)).to.include(field)
      }
      expect((await admin(beacon.url, 'GET', base)).body.savedReports).to.deep.equal([])
      expectError(await admin(beacon.url, 'GET', `${base}/nope/result`), 'saved_report_not_found')
      const id = (await admin(beacon.url, 'POST', base, definition)).body.id as string
      expectError(await admin(beacon.url, 'GET', `${base}/${id}/result?format=xml`), 'invalid_field', '/format')
    })
  })

  describe('results', () => {
    it('counts events, unique visitors and unique profiles exactly, per day bucket', async () => {
      const [a, b, c] = [visitorId(), visitorId(), visitorId()]
      const range = days(2)
      await send(a)
      await send(a)
      await send(b, identified(tenant, 'ana'))
      beacon.clock.advance(DAY_MS)
      await send(a)
      await send(c, identified(tenant, 'ana'))
      await send(c, identified(tenant, 'ana'))
      const events = await preview({ metric: { type: 'events' }, range })
      expect(events.rows.map(r => [r.bucket, r.value])).to.deep.equal([[range.from, 3], [new Date(Date.parse(range.from) + DAY_MS).toISOString(), 3]])
      expect(events.totals).to.deep.equal([{ group: null, value: 6 }])
      const visitors = await preview({ metric: { type: 'uniqueVisitors' }, range })
      expect(visitors.rows.map(r => r.value)).to.deep.equal([2, 2])
      // Distinct over the range, not the sum of the days: a, b and c.
      expect(visitors.totals[0]!.value).to.equal(3)
      const profiles = await preview({ metric: { type: 'uniqueProfiles' }, range })
      expect(profiles.rows.map(r => r.value)).to.deep.equal([1, 1])
      expect(profiles.totals[0]!.value).to.equal(1)
    })

    it('breaks down by kind, platform, device, path, campaign, variant and a custom field, with filters', async () => {
      const [a, b] = [visitorId(), visitorId()]
      await send(a, { path: '/shoes', device: 'mobile', plan: 'gold' })
      await send(a, { path: '/shoes', device: 'mobile', plan: 'gold', platform: 'ios' })
      await send(b, { path: '/hats', device: 'desktop', plan: 'free' })
      await send(b, { event: 'campaignView', campaignId: 'summer', variant: 'b' })
      await send(a, { event: 'campaignView', campaignId: 'summer', variant: 'a' })
      await send(a, { event: 'campaignClick', campaignId: 'summer', variant: 'a' })
      const count = { type: 'events' }
      expect(await totals({ metric: count, breakdown: { by: 'kind' } })).to.deep.equal({ pageView: 3, campaignView: 2, campaignClick: 1 })
      expect(await totals({ metric: count, breakdown: { by: 'platform' } })).to.deep.equal({ web: 5, ios: 1 })
      expect(await totals({ metric: count, breakdown: { by: 'device' } })).to.deep.equal({ mobile: 2, desktop: 1, null: 3 })
      expect(await totals({ metric: { type: 'uniqueVisitors' }, breakdown: { by: 'path' }, filters: [{ by: 'kind', values: ['pageView'] }] })).to.deep.equal({ '/shoes': 1, '/hats': 1 })
      expect(await totals({ metric: count, breakdown: { by: 'campaign' }, filters: [{ by: 'kind', values: ['campaignView', 'campaignClick'] }] })).to.deep.equal({ summer: 3 })
      expect(await totals({ metric: count, breakdown: { by: 'variant' }, filters: [{ by: 'campaign', values: ['summer'] }] })).to.deep.equal({ a: 2, b: 1 })
      expect(await totals({ metric: count, breakdown: { by: 'field', field: 'plan' }, filters: [{ by: 'platform', values: ['web'] }] })).to.deep.equal({ gold: 1, free: 1, null: 3 })
      // Filters combine: every filter must pass, any value of each.
      expect(await totals({ metric: count, filters: [{ by: 'field', field: 'plan', values: ['gold', 'free'] }, { by: 'device', values: ['mobile'] }] })).to.deep.equal({ null: 2 })
      expect(await totals({ metric: count, filters: [{ by: 'kind', values: ['noSuchKind'] }] })).to.deep.equal({ null: 0 })
    })

    it('breaks down and filters by the segments the visitor was in at each event: one event in two segments counts in both', async () => {
      const segment = (name: string, body: Record<string, unknown>) => admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/segments/${name}`, body)
      expect((await segment('viewer', { rule: { fact: 'count', event: 'productView', op: 'gte', value: 1 } })).status).to.equal(200)
      expect((await segment('vip', {})).status).to.equal(200)
      expect((await segment('member', {})).status).to.equal(200)
      const assign = async (who: Record<string, string>, change: Record<string, string[]>): Promise<void> => {
        const path = 'visitorId' in who ? '/visitors/segments' : '/profiles/segments'
        const res = await post(beacon.url, path, { account: tenant.account, token: tenant.token, ...who, ...change })
        expect(res.status, JSON.stringify(res.body)).to.equal(200)
      }
      const [a, b, c] = [visitorId(), visitorId(), visitorId()]
      await send(a) // in no segment: (none)
      await send(a, { event: 'productView', sku: 's1' }) // enters viewer with this event: counted in it
      await assign({ visitorId: a }, { assignees: ['vip'] })
      await send(a, { event: 'purchase', orderId: 'o-1', orderTotal: 30 }) // viewer and vip: in both groups
      await assign({ visitorId: b }, { assignees: ['vip'] })
      await send(b, { event: 'productView', sku: 's2' }) // vip, and enters viewer
      await assign({ visitorId: b }, { removes: ['vip'] })
      await send(b, { event: 'purchase', orderId: 'o-2', orderTotal: 10 }) // left vip between its events: viewer only
      await assign({ profileId: 'ana' }, { assignees: ['member'] })
      await send(c, identified(tenant, 'ana')) // a linked device: its profile's segments too
      const count = { type: 'events' }
      const bySegment = await preview({ metric: count, breakdown: { by: 'segment' } })
      expect(Object.fromEntries(bySegment.totals.map(t => [String(t.group), t.value]))).to.deep.equal({ viewer: 4, vip: 2, member: 1, null: 1 })
      // 6 events, counted 8 times across the groups: the result says its groups overlap.
      expect(bySegment).to.deep.include({ eventsRead: 6, groupsOverlap: true })
      expect((await preview({ metric: count, breakdown: { by: 'kind' } }))).to.deep.include({ groupsOverlap: false })
      expect(await totals({ metric: { type: 'uniqueVisitors' }, breakdown: { by: 'segment' } })).to.deep.equal({ viewer: 2, vip: 2, member: 1, null: 1 })
      expect(await totals({ metric: { type: 'sum', field: 'orderTotal' }, breakdown: { by: 'segment' } })).to.deep.equal({ viewer: 40, vip: 30 })
      expect(await totals({ metric: { type: 'conversion', from: 'productView', to: 'purchase', windowHours: 1 }, breakdown: { by: 'segment' } })).to.deep.equal({ viewer: 1, vip: 1 })
      // A filter by segment: events the visitor sent while in one of its values.
      expect(await totals({ metric: count, breakdown: { by: 'kind' }, filters: [{ by: 'segment', values: ['vip'] }] })).to.deep.equal({ productView: 1, purchase: 1 })
      expect(await totals({ metric: count, filters: [{ by: 'segment', values: ['vip', 'member'] }] })).to.deep.equal({ null: 3 })
      // The log shows each event's segments; a reload at start reads them back into the same counts.
      const page = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/events?kind=purchase`)
      expect(page.body.events.map((e: { visitorId: string, segments?: string[] }) => [e.visitorId, [...e.segments ?? []].sort()])).to.deep.equal([[b, ['viewer']], [a, ['viewer', 'vip']]])
      const first = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/events?kind=pageView&visitorId=${a}`)
      expect(first.body.events[0]).to.not.have.property('segments')
      const { dataDir, clock } = beacon
      await beacon.beacon.stop()
      beacon = await startInProcess(dataDir, {}, clock)
      expect(await totals({ metric: count, breakdown: { by: 'segment' } })).to.deep.equal({ viewer: 4, vip: 2, member: 1, null: 1 })
    })

    it('sums and averages a numeric field', async () => {
      await send(visitorId(), { event: 'purchase', orderId: 'o-1', orderTotal: 10, platform: 'web' })
      await send(visitorId(), { event: 'purchase', orderId: 'o-2', orderTotal: 30, platform: 'ios' })
      await send(visitorId(), { event: 'purchase', orderId: 'o-3', orderTotal: 50, platform: 'ios' })
      await send(visitorId(), { path: '/no-total' })
      expect(await totals({ metric: { type: 'sum', field: 'orderTotal' } })).to.deep.equal({ null: 90 })
      expect(await totals({ metric: { type: 'mean', field: 'orderTotal' }, breakdown: { by: 'platform' } })).to.deep.equal({ ios: 40, web: 10 })
    })

    it('counts a conversion from one kind to another within the window, from each visitor\'s first start', async () => {
      const [quick, slow, never, before] = [visitorId(), visitorId(), visitorId(), visitorId()]
      await send(before, { event: 'purchase', orderId: 'early' })
      await send(quick, { event: 'productView', sku: 's1' })
      await send(slow, { event: 'productView', sku: 's1' })
      await send(never, { event: 'productView', sku: 's1', platform: 'ios' })
      await send(before, { event: 'productView', sku: 's1' })
      beacon.clock.advance(HOUR_MS)
      await send(quick, { event: 'purchase', orderId: 'o-1' })
      await send(quick, { event: 'purchase', orderId: 'o-2' })
      beacon.clock.advance(3 * HOUR_MS)
      await send(slow, { event: 'purchase', orderId: 'o-3' })
      const result = await preview({ metric: { type: 'conversion', from: 'productView', to: 'purchase', windowHours: 2 } })
      // Started: quick, slow, never, before; converted within 2 h: quick (before bought before its view).
      expect(result.totals).to.deep.equal([{ group: null, value: 0.25, started: 4, converted: 1 }])
      const wide = await preview({ metric: { type: 'conversion', from: 'productView', to: 'purchase', windowHours: 24 }, breakdown: { by: 'platform' } })
      expect(wide.totals).to.deep.equal([{ group: 'web', value: 2 / 3, started: 3, converted: 2 }, { group: 'ios', value: 0, started: 1, converted: 0 }])
    })

    it('buckets by hour and by week (weeks start on Monday, UTC)', async () => {
      const start = Date.parse('2026-03-04T10:30:00Z') // a Wednesday
      beacon.clock.ms = start
      await send(visitorId())
      beacon.clock.advance(2 * HOUR_MS)
      await send(visitorId())
      const hours = await preview({ metric: { type: 'events' }, granularity: 'hour', range: { from: '2026-03-04T10:00:00Z', to: '2026-03-04T13:00:00Z' } })
      expect(hours.rows.map(r => [r.bucket, r.value])).to.deep.equal([['2026-03-04T10:00:00.000Z', 1], ['2026-03-04T11:00:00.000Z', 0], ['2026-03-04T12:00:00.000Z', 1]])
      const weeks = await preview({ metric: { type: 'events' }, granularity: 'week', range: { from: '2026-03-01T00:00:00Z', to: '2026-03-10T00:00:00Z' } })
      expect(weeks.rows.map(r => [r.bucket, r.value])).to.deep.equal([['2026-02-23T00:00:00.000Z', 0], ['2026-03-02T00:00:00.000Z', 2], ['2026-03-09T00:00:00.000Z', 0]])
    })

    it('answers a saved report\'s result as JSON and as CSV (formulas defused)', async () => {
      await send(visitorId(), { path: '=cmd' })
      await send(visitorId(), { path: '/a,b' })
      const created = await admin(beacon.url, 'POST', base, { name: 'Paths', metric: { type: 'events' }, breakdown: { by: 'path' }, range: days(1), granularity: 'day' })
      const id = created.body.id as string
      const result = await admin(beacon.url, 'GET', `${base}/${id}/result`)
      expect(result.status).to.equal(200)
      expect(result.body).to.deep.include({ id, name: 'Paths', breakdown: 'path', groupsOmitted: 0, eventsRead: 2 })
      const res = await fetch(`${beacon.url}${base}/${id}/result?format=csv`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } })
      expect(res.status).to.equal(200)
      expect(res.headers.get('content-type')).to.equal('text/csv; charset=utf-8')
      const day = days(1).from
      expect(await res.text()).to.equal(`bucket,group,value\r\n${day},"/a,b",1\r\n${day},'=cmd,1\r\n`)
    })

    it('forgets erased people, follows retention, and reloads the log after a restart', async () => {
      await beacon.close()
      beacon = await startInProcess(tempDir(), { BEACON_EVENT_RETENTION_DAYS: '2' })
      tenant = await createTenant(beacon.url)
      base = `/admin/accounts/${tenant.account}/saved-reports`
      const [old, kim, lee] = [visitorId(), visitorId(), visitorId()]
      await send(old)
      beacon.clock.advance(3 * DAY_MS)
      await send(kim, identified(tenant, 'kim'))
      await send(lee)
      const range = { from: new Date(beacon.clock.ms - 4 * DAY_MS).toISOString(), to: new Date(beacon.clock.ms + 1).toISOString() }
      const unique = { metric: { type: 'uniqueVisitors' }, range }
      expect((await preview(unique)).totals[0]!.value).to.equal(3)
      await beacon.beacon.events!.trimAll(beacon.clock.ms)
      expect((await preview(unique)).totals[0]!.value).to.equal(2)
      expect((await admin(beacon.url, 'DELETE', `/admin/accounts/${tenant.account}/profiles/kim`)).status).to.equal(200)
      expect((await preview(unique)).totals[0]!.value).to.equal(1)
      const { dataDir, clock } = beacon
      await beacon.beacon.stop()
      beacon = await startInProcess(dataDir, { BEACON_EVENT_RETENTION_DAYS: '2' }, clock)
      expect((await preview(unique)).totals[0]!.value).to.equal(1)
      await send(kim)
      expect((await preview(unique)).totals[0]!.value).to.equal(2)
    })
  })

  it('answers 501 event_log_not_kept when no log is kept (BEACON_EVENT_RETENTION_DAYS=0)', async () => {
    await beacon.close()
    beacon = await startInProcess(tempDir(), { BEACON_EVENT_RETENTION_DAYS: '0' })
    tenant = await createTenant(beacon.url)
    base = `/admin/accounts/${tenant.account}/saved-reports`
    const definition = { name: 'x', metric: { type: 'events' }, range: { lastDays: 1 }, granularity: 'day' }
    expectError(await admin(beacon.url, 'GET', base), 'event_log_not_kept')
    expectError(await admin(beacon.url, 'POST', base, definition), 'event_log_not_kept')
    expectError(await admin(beacon.url, 'POST', `${base}-preview`, definition), 'event_log_not_kept')
    expectError(await admin(beacon.url, 'GET', `${base}/r-1/result`), 'event_log_not_kept')
  })
})
