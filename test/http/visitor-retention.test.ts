// The retention of inactive anonymous visitors (BEACON_VISITOR_RETENTION_DAYS), embedded mode, on a
// manual clock: a pass erases the anonymous visitors inactive past the retention, with their indexes,
// outbox rows and delivery records; active ones and those linked to a profile stay; a pass a crash
// interrupted is finished at the next start; without the setting nothing is erased.

import { expect } from 'chai'
import { open } from 'lmdb'
import { admin, createTenant, identified, post, removeDir, tempDir, visitorId, type Tenant } from '../helpers/beacon.js'
import { startInProcess, type InProcess } from '../helpers/in-process.js'
import { startReceiver, type Receiver } from '../webhooks/helpers.js'
import { until } from '../helpers/until.js'
import { recordsIn } from '../../src/delivery/records-db.js'
import { KEY_PART_MAX, type Store } from '../../src/store/store.js'
import { RETENTION_BATCH_MAX } from '../../src/jobs/visitor-retention.js'

const DAY_MS = 86_400_000
const RETENTION = { BEACON_VISITOR_RETENTION_DAYS: '30', BEACON_DELIVERY_RETENTION_MS: '0', BEACON_DURABILITY: 'committed' }

/** A webhook on every pageView (its records kept: BEACON_DELIVERY_RETENTION_MS=0) and a segment with an index of members. */
async function configure (url: string, tenant: Tenant, receiver: Receiver): Promise<void> {
  const base = `/admin/accounts/${tenant.account}`
  expect((await admin(url, 'PUT', `${base}/segments/viewers`, { rule: { fact: 'count', event: 'pageView', within: '90d', op: 'gte', value: 1 } })).status).to.equal(200)
  const hook = await admin(url, 'PUT', `${base}/webhooks/views`, {
    name: 'views', enabled: true, trigger: { kind: 'event', events: ['pageView'] },
    request: { method: 'POST', url: `${receiver.url}/in`, payload: '{"who": "{{visitorId}}"}' }, delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1 },
  })
  expect(hook.status, JSON.stringify(hook.body)).to.equal(200)
  const members = await admin(url, 'PUT', `${base}/webhooks/viewers`, {
    name: 'viewers', enabled: true, trigger: { kind: 'schedule', cron: '0 0 1 1 *', segments: ['viewers'] },
    request: { method: 'POST', url: `${receiver.url}/members` }, delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1 },
  })
  expect(members.status, JSON.stringify(members.body)).to.equal(200)
}

async function view (url: string, tenant: Tenant, id: string, extra: Record<string, unknown> = {}): Promise<void> {
  const res = await post(url, '/campaigns/query', { account: tenant.account, visitorId: id, platform: 'web', event: 'pageView', path: '/', ...extra })
  expect(res.status, JSON.stringify(res.body)).to.equal(200)
}

/** Every trace of the visitor in the store: its row, index entries, outbox rows and delivery records. */
function traces (store: Store, account: string, id: string): string[] {
  const found: string[] = []
  if (store.visitors.get([account, id]) !== undefined) found.push('visitors')
  for (const key of store.expiries.getKeys()) if (JSON.stringify(key).includes(id)) found.push('expiries')
  for (const key of store.members.getKeys({ start: [account], end: [account, KEY_PART_MAX] })) if (JSON.stringify(key).includes(id)) found.push('members')
  for (const record of recordsIn(store, { start: [account], end: [account, KEY_PART_MAX] })) if (record.item.context.visitorId === id) found.push(`delivery ${record.status}`)
  return found
}

function deliveriesOf (store: Store, account: string, id: string): number {
  return [...recordsIn(store, { start: [account], end: [account, KEY_PART_MAX] })].filter(record => record.item.context.visitorId === id).length
}

describe('retention of inactive anonymous visitors (BEACON_VISITOR_RETENTION_DAYS)', () => {
  let receiver: Receiver
  let beacon: InProcess | null = null
  beforeEach(async () => { receiver = await startReceiver() })
  afterEach(async () => {
    await beacon?.close()
    beacon = null
    await receiver.close()
  })

  it('erases anonymous visitors inactive past the retention, with their indexes and delivery records; keeps active and linked ones', async function () {
    this.timeout(60_000)
    beacon = await startInProcess(tempDir(), RETENTION)
    const { url, clock } = beacon
    const store = beacon.beacon.store
    const tenant = await createTenant(url)
    await configure(url, tenant, receiver)
    const idle = visitorId()
    const attributesOnly = visitorId()
    const linked = visitorId()
    const active = visitorId()
    const queriedOnly = visitorId()
    await view(url, tenant, idle)
    await view(url, tenant, linked, identified(tenant, 'person-1'))
    await view(url, tenant, active)
    expect((await post(url, '/visitors/attributes', { account: tenant.account, token: tenant.token, visitorId: attributesOnly, attributes: { plan: 'free' } })).status).to.equal(200)
    await until('3 views delivered', () => receiver.requests.filter(r => r.url === '/in').length === 3)
    // The receiver has the request before Beacon records its answer: wait for the record too.
    await until('the idle view recorded as delivered', () => traces(store, tenant.account, idle).includes('delivery delivered'))
    expect(traces(store, tenant.account, idle)).to.include.members(['visitors', 'members', 'delivery delivered'])

    // 20 days on: one visitor comes back (an event), one is only read (a query writes nothing new).
    clock.advance(20 * DAY_MS)
    await view(url, tenant, active)
    expect((await post(url, '/visitors/query', { account: tenant.account, token: tenant.token, visitorId: queriedOnly })).status).to.equal(200)
    await until('4 views delivered', () => receiver.requests.filter(r => r.url === '/in').length === 4)
    // Not yet 30 days for anybody: nothing goes.
    expect(await beacon.beacon.sweepInactiveVisitors()).to.deep.equal({ erased: 0, deliveries: 0 })

    clock.advance(11 * DAY_MS)
    const outcome = await beacon.beacon.sweepInactiveVisitors()
    expect(outcome.erased).to.equal(2)
    expect(outcome.deliveries).to.equal(1)
    expect(traces(store, tenant.account, idle)).to.deep.equal([])
    expect(traces(store, tenant.account, attributesOnly)).to.deep.equal([])
    // The one back 11 days ago, its two delivery records with it; the linked one (it goes with its profile only).
    expect(traces(store, tenant.account, active)).to.include.members(['visitors', 'members'])
    expect(deliveriesOf(store, tenant.account, active)).to.equal(2)
    expect(traces(store, tenant.account, linked)).to.include.members(['visitors', 'delivery delivered'])
    expect((await admin(url, 'GET', `/admin/accounts/${tenant.account}/visitors/${linked}`)).body.profileId).to.equal('person-1')
    const erased = (await admin(url, 'GET', `/admin/accounts/${tenant.account}/visitors/${idle}`)).body
    expect(erased).to.include({ firstSeen: null, profileId: null })
    expect(erased.attributes).to.deep.equal({})

    // 20 days later the queried one (its row dated by that query) and the active one are past it too.
    clock.advance(20 * DAY_MS)
    expect((await beacon.beacon.sweepInactiveVisitors()).erased).to.equal(2)
    expect(traces(store, tenant.account, active)).to.deep.equal([])
    expect(store.visitors.get([tenant.account, queriedOnly])).to.equal(undefined)
    expect(traces(store, tenant.account, linked)).to.include('visitors')
    expect(await (await fetch(`${url}/metrics`)).text()).to.match(/^beacon_visitors_expired_total 4$/m)
    // An erased visitor that comes back starts afresh.
    await view(url, tenant, idle)
    expect((await admin(url, 'GET', `/admin/accounts/${tenant.account}/visitors/${idle}`)).body.counts).to.deep.equal({ pageView: 1 })
  })

  it('goes through every visitor in batches, keeping the one active since', async function () {
    this.timeout(120_000)
    beacon = await startInProcess(tempDir(), { BEACON_VISITOR_RETENTION_DAYS: '1.5', BEACON_DURABILITY: 'committed' })
    const { url, clock } = beacon
    const tenant = await createTenant(url)
    const ids = Array.from({ length: RETENTION_BATCH_MAX + 200 }, () => visitorId())
    for (let i = 0; i < ids.length; i += 50) {
      await Promise.all(ids.slice(i, i + 50).map(id => post(url, '/visitors/attributes', { account: tenant.account, token: tenant.token, visitorId: id, attributes: { n: 1 } })))
    }
    clock.advance(DAY_MS)
    // 1.5 days: a day is not enough.
    expect((await beacon.beacon.sweepInactiveVisitors()).erased).to.equal(0)
    clock.advance(DAY_MS)
    // The last in key order (the pass's second batch) comes back.
    const last = [...ids].sort().at(-1)!
    await view(url, tenant, last)
    expect((await beacon.beacon.sweepInactiveVisitors()).erased).to.equal(ids.length - 1)
    expect(beacon.beacon.store.visitors.get([tenant.account, last])).not.to.equal(undefined)
    expect([...beacon.beacon.store.visitors.getKeys({ start: [tenant.account], end: [tenant.account, KEY_PART_MAX] })]).to.deep.equal([[tenant.account, last]])
  })

  it('finishes at the next start a pass a crash interrupted (the batch under way, its delivery records too)', async function () {
    this.timeout(60_000)
    const dataDir = tempDir()
    try {
      beacon = await startInProcess(dataDir, RETENTION)
      const tenant = await createTenant(beacon.url)
      await configure(beacon.url, tenant, receiver)
      const idle = visitorId()
      const other = visitorId()
      await view(beacon.url, tenant, idle)
      await view(beacon.url, tenant, other)
      await until('2 views delivered', () => receiver.requests.filter(r => r.url === '/in').length === 2)
      const clock = beacon.clock
      await beacon.beacon.stop()
      beacon = null
      // What a crash during a batch leaves: the pass's record naming the batch (its erases not all done).
      clock.advance(31 * DAY_MS)
      const root = open({ path: dataDir })
      await root.openDB('meta', {}).put('visitor-retention', {
        cutoffMs: clock.nowMs() - 30 * DAY_MS, startedAtMs: clock.nowMs(), after: [tenant.account, idle], batch: [[tenant.account, idle]], unforgotten: [], erased: 0, deliveries: 0,
      })
      await root.close()
      // A long sweep interval: only the resumed pass runs.
      beacon = await startInProcess(dataDir, RETENTION, clock)
      const store = beacon.beacon.store
      await until('the pass resumed and finished', () => store.meta.get('visitor-retention') === undefined)
      expect(traces(store, tenant.account, idle)).to.deep.equal([])
      // The resumed pass went on after its cursor only: the other visitor, inactive too, went with it
      // if it sorts after the cursor, else with the next pass.
      await beacon.beacon.sweepInactiveVisitors()
      expect(traces(store, tenant.account, other)).to.deep.equal([])
    } finally {
      await beacon?.close()
      beacon = null
      removeDir(dataDir)
    }
  })

  it('erases nothing without the setting (the default)', async function () {
    this.timeout(60_000)
    beacon = await startInProcess(tempDir(), { BEACON_DURABILITY: 'committed' })
    const tenant = await createTenant(beacon.url)
    const id = visitorId()
    await view(beacon.url, tenant, id)
    beacon.clock.advance(3650 * DAY_MS)
    expect(await beacon.beacon.sweepInactiveVisitors()).to.deep.equal({ erased: 0, deliveries: 0 })
    expect(beacon.beacon.store.visitors.get([tenant.account, id])).not.to.equal(undefined)
  })
})
