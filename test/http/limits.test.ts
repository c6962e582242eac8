// Limits of what an account holds, enforced atomically (concurrent creations stop exactly at the
// limit), and cursor paging of every admin listing (each item exactly once).

import { expect } from 'chai'
import { admin, createTenant, discardBeacon, startBeacon, startWithTenant, type Answer, type BeaconProcess, type Tenant } from '../helpers/beacon.js'
import { EVENT_TYPES_MAX, PAGE_LIMIT_MAX, SEGMENT_DEFS_MAX, TOKEN_ATTRIBUTES_MAX, TOKENS_MAX, WEBHOOKS_MAX } from '../../src/store/limits.js'
import { BUILT_IN_EVENTS } from '../../src/catalog/event-types.js'
import { startInProcess } from '../helpers/in-process.js'

/** Run `count` calls with at most `width` in flight; the statuses in call order. */
async function concurrently (count: number, width: number, call: (i: number) => Promise<number>): Promise<number[]> {
  const statuses: number[] = new Array(count)
  let next = 0
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < count) {
      const i = next++
      statuses[i] = await call(i)
    }
  }))
  return statuses
}

function tally (statuses: number[]): Record<number, number> {
  const out: Record<number, number> = {}
  for (const status of statuses) out[status] = (out[status] ?? 0) + 1
  return out
}

/** Every item of a listing, page by page; asserts each page's size. */
async function walk (url: string, path: string, key: string, limit: number): Promise<string[]> {
  const seen: string[] = []
  let cursor: string | null = null
  do {
    const res: Answer = await admin(url, 'GET', `${path}?limit=${limit}${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`)
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
    const items = res.body[key] as Array<Record<string, string>>
    expect(items.length).to.be.at.most(limit + (key === 'eventTypes' && cursor === null ? BUILT_IN_EVENTS.size : 0))
    for (const item of items) seen.push(item.id ?? item.account ?? item.name!)
    cursor = res.body.next
    if (cursor !== null) expect(items.length).to.be.greaterThan(0)
  } while (cursor !== null)
  return seen
}

describe('account limits under concurrent creation', function () {
  this.timeout(120_000)
  let beacon: BeaconProcess
  let tenant: Tenant

  before(async () => { ({ beacon, tenant } = await startWithTenant({ env: { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' } })) })
  after(() => discardBeacon(beacon))

  const base = (): string => `/admin/accounts/${tenant.account}`

  it(`creates exactly ${WEBHOOKS_MAX} webhooks of ${WEBHOOKS_MAX + 30} concurrent PUTs, refusing the rest with 409`, async () => {
    const webhook = { name: 'w', enabled: true, trigger: { kind: 'event', events: ['purchase'] }, request: { method: 'POST', url: 'http://127.0.0.1:9/in' }, delivery: { mode: 'async', timeoutMs: 1000, batchSize: 1 } }
    const statuses = await concurrently(WEBHOOKS_MAX + 30, WEBHOOKS_MAX + 30, async i => (await admin(beacon.url, 'PUT', `${base()}/webhooks/w${i}`, webhook)).status)
    expect(tally(statuses)).to.deep.equal({ 200: WEBHOOKS_MAX, 409: 30 })
    expect(await walk(beacon.url, `${base()}/webhooks`, 'webhooks', 7)).to.have.length(WEBHOOKS_MAX)
    // Replacing an existing one is no creation: still allowed at the limit.
    const replaced = statuses.indexOf(200)
    expect((await admin(beacon.url, 'PUT', `${base()}/webhooks/w${replaced}`, { ...webhook, name: 'again' })).status).to.equal(200)
  })

  it(`creates exactly ${SEGMENT_DEFS_MAX} segments and ${EVENT_TYPES_MAX} event types of concurrent PUTs`, async () => {
    const segments = await concurrently(SEGMENT_DEFS_MAX + 40, 200, async i => (await admin(beacon.url, 'PUT', `${base()}/segments/s${i}`, { description: 'manual' })).status)
    expect(tally(segments)).to.deep.equal({ 200: SEGMENT_DEFS_MAX, 409: 40 })
    const types = await concurrently(EVENT_TYPES_MAX + 40, 200, async i => (await admin(beacon.url, 'PUT', `${base()}/event-types/t${i}`, { required: [] })).status)
    expect(tally(types)).to.deep.equal({ 200: EVENT_TYPES_MAX, 409: 40 })
    const refused = await admin(beacon.url, 'PUT', `${base()}/event-types/one-more`, { required: [] })
    expect(refused.body.message).to.equal(`An account has at most ${EVENT_TYPES_MAX.toLocaleString('en-US')} custom event types; delete some first.`)
  })

  it(`creates exactly ${TOKENS_MAX} live tokens (the tenant's own included); a revoked one frees its slot`, async () => {
    const spec = { name: 't', attributes: ['*'], access: 'read' }
    const statuses = await concurrently(TOKENS_MAX + 20, 200, async () => (await admin(beacon.url, 'POST', `${base()}/tokens`, spec)).status)
    expect(tally(statuses)).to.deep.equal({ 201: TOKENS_MAX - 1, 409: 21 })
    const tokens = await walk(beacon.url, `${base()}/tokens`, 'tokens', PAGE_LIMIT_MAX)
    expect(tokens).to.have.length(TOKENS_MAX)
    expect((await admin(beacon.url, 'DELETE', `${base()}/tokens/${tokens[0]}`)).status).to.equal(200)
    expect((await admin(beacon.url, 'POST', `${base()}/tokens`, spec)).status).to.equal(201)
    expect((await admin(beacon.url, 'POST', `${base()}/tokens`, spec)).status).to.equal(409)
  })

  it(`refuses a token naming more than ${TOKEN_ATTRIBUTES_MAX} attributes`, async () => {
    const names = (n: number): string[] => Array.from({ length: n }, (_, i) => `a${i}`)
    const other = await createTenant(beacon.url, 'other')
    const refused = await admin(beacon.url, 'POST', `/admin/accounts/${other.account}/tokens`, { name: 't', attributes: names(TOKEN_ATTRIBUTES_MAX + 1), access: 'read' })
    expect(refused.status).to.equal(400)
    expect(refused.body.errors[0].field).to.equal('/attributes')
    expect((await admin(beacon.url, 'POST', `/admin/accounts/${other.account}/tokens`, { name: 't', attributes: names(TOKEN_ATTRIBUTES_MAX), access: 'read' })).status).to.equal(201)
  })
})

describe('admin listings in pages', function () {
  this.timeout(60_000)
  let beacon: BeaconProcess

  before(async () => { beacon = await startBeacon({}) })
  after(() => discardBeacon(beacon))

  it('walks every campaign, segment and event type exactly once, in key order, with items created between pages', async () => {
    const tenant = await createTenant(beacon.url)
    const base = `/admin/accounts/${tenant.account}`
    const campaign = { name: 'c', status: 'active', priority: 1, trigger: { events: ['pageView'] }, content: {} }
    await concurrently(55, 20, async i => (await admin(beacon.url, 'PUT', `${base}/campaigns/c${String(i).padStart(2, '0')}`, campaign)).status)
    await concurrently(23, 20, async i => (await admin(beacon.url, 'PUT', `${base}/segments/s${i}`, {})).status)
    await concurrently(12, 12, async i => (await admin(beacon.url, 'PUT', `${base}/event-types/e${i}`, { required: [] })).status)

    const campaigns = await walk(beacon.url, `${base}/campaigns`, 'campaigns', 10)
    expect(campaigns).to.deep.equal(Array.from({ length: 55 }, (_, i) => `c${String(i).padStart(2, '0')}`))
    expect(new Set(await walk(beacon.url, `${base}/segments`, 'segments', 4)).size).to.equal(23)
    const types = await walk(beacon.url, `${base}/event-types`, 'eventTypes', 5)
    // The built-in event types come first, on the first page.
    expect(types.slice(0, BUILT_IN_EVENTS.size)).to.deep.equal(['pageView', 'productView', 'purchase', 'campaignView', 'campaignClick', 'consent'])
    expect(types.slice(BUILT_IN_EVENTS.size).sort()).to.deep.equal(Array.from({ length: 12 }, (_, i) => `e${i}`).sort())

    // A cursor is a key: a campaign created behind the walk's position is not seen, one ahead is, none twice.
    const first = await admin(beacon.url, 'GET', `${base}/campaigns?limit=20`)
    expect(first.body.next).to.equal('c19')
    await admin(beacon.url, 'PUT', `${base}/campaigns/c00a`, campaign)
    await admin(beacon.url, 'PUT', `${base}/campaigns/c99`, campaign)
    const rest = await walk(beacon.url, `${base}/campaigns`, 'campaigns', 100)
    expect(rest.filter(id => id > 'c19')).to.have.length(55 - 20 + 1)
  })

  it('lists accounts and tokens in pages, and refuses a bad limit or cursor with 400', async () => {
    const created = []
    for (let i = 0; i < 7; i++) created.push((await createTenant(beacon.url, `site ${i}`)).account)
    const accounts = await walk(beacon.url, '/admin/accounts', 'accounts', 3)
    expect(new Set(accounts).size).to.equal(accounts.length)
    expect(accounts).to.include.members(created)
    expect((await admin(beacon.url, 'GET', '/admin/accounts')).body.next).to.equal(null)
    expect((await admin(beacon.url, 'GET', '/admin/accounts?limit=0')).status).to.equal(400)
    expect((await admin(beacon.url, 'GET', `/admin/accounts?limit=${PAGE_LIMIT_MAX + 1}`)).status).to.equal(400)
    expect((await admin(beacon.url, 'GET', `/admin/accounts?cursor=${'x'.repeat(301)}`)).status).to.equal(400)
  })
})

describe('nesting of stored JSON values', () => {
  // issue 27: content 1,500 arrays deep (3 KB) overflowed msgpackr's stack: a 500.
  it('refuses campaign content nested deeper than 32 levels with 400 invalid_campaign at /content, and stores 32', async () => {
    const node = await startInProcess()
    try {
      const tenant = await createTenant(node.url)
      const nest = (levels: number): unknown => JSON.parse('['.repeat(levels) + ']'.repeat(levels))
      const campaign = (content: unknown): unknown => ({ name: 'Deep', status: 'active', priority: 1, trigger: { events: ['pageView'] }, content })
      const path = `/admin/accounts/${tenant.account}/campaigns/deep`
      for (const levels of [1500, 33]) {
        const refused = await admin(node.url, 'PUT', path, campaign(nest(levels)))
        expect(refused.status, `${levels} levels: ${JSON.stringify(refused.body)}`).to.equal(400)
        expect(refused.body.errors[0]).to.include({ code: 'invalid_campaign', field: '/content' })
      }
      const objects = JSON.parse('{"a":'.repeat(31) + '[1]' + '}'.repeat(31))
      expect((await admin(node.url, 'PUT', path, campaign(objects))).status).to.equal(200)
      expect((await admin(node.url, 'GET', path)).body.content).to.deep.equal(objects)
    } finally {
      await node.close()
    }
  })
})
