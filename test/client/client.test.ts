// beacon/client (src/client) against a real embedded Beacon process: the public and admin API typed
// from the route schemas, Idempotency-Key on the public writes, retries (503, 429 with Retry-After, a
// dropped connection) and their bounds, typed errors, and the route map's refreshes (partition_moved,
// a Beacon-Route header naming another node). Retries are provoked by a real HTTP server in front of
// Beacon (./front.ts); the client's waits are recorded through its injected `sleep`, never timed.

import { expect } from 'chai'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { ADMIN_KEY, discardBeacon, identified, startWithTenant, visitorId, type BeaconProcess, type Tenant } from '../helpers/beacon.js'
import { BeaconClient, BeaconConnectionError, BeaconError, InvalidArgumentError, partitionOf, type AttemptInfo, type ClientOptions } from '../../src/client/index.js'
import { startFront, type Front } from './front.js'
import { until } from '../helpers/until.js'

/** The error a promise rejects with (fails when it resolves). */
async function refusal (promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise
  } catch (error) {
    return error
  }
  throw new Error('expected a refusal, the call succeeded')
}

describe('beacon/client (embedded Beacon, real process)', function () {
  this.timeout(60_000)
  let beacon: BeaconProcess
  let tenant: Tenant
  let client: BeaconClient

  before(async () => {
    ({ beacon, tenant } = await startWithTenant())
    client = new BeaconClient({ url: beacon.url, adminKey: ADMIN_KEY, account: tenant.account, token: tenant.token })
  })

  after(async () => {
    await client?.close()
    await discardBeacon(beacon)
  })

  it('is the package export beacon/client', async () => {
    const exported = await import('beacon/client' as string) as { BeaconClient?: unknown }
    expect(exported.BeaconClient).to.be.a('function')
  })

  it('answers the campaigns of an event (admin campaign, public query)', async () => {
    await client.admin.putCampaign(tenant.account, 'shoes', { name: 'Shoes', status: 'active', priority: 5, trigger: { events: ['productView'] }, content: { banner: 'shoes.png' } })
    const answer = await client.campaignsQuery({ visitorId: visitorId(), platform: 'web', event: 'productView', sku: 'sku-1' })
    expect(answer.status).to.equal(200)
    expect(answer.campaigns.map(campaign => campaign.id)).to.deep.equal(['shoes'])
    const listed = await client.admin.listCampaigns(tenant.account)
    expect(listed.campaigns.map(campaign => campaign.id)).to.include('shoes')
    expect(await client.admin.deleteCampaign(tenant.account, 'shoes')).to.deep.equal({ id: 'shoes', deleted: true })
  })

  it('writes and reads a visitor\'s and a profile\'s attributes and segments', async () => {
    const visitor = visitorId()
    expect(await client.visitorsAttributes({ visitorId: visitor, attributes: { plan: 'pro' } })).to.include({ status: 200, visitorId: visitor })
    const segments = await client.visitorsSegments({ visitorId: visitor, assignees: ['vip'] })
    expect(segments.segments).to.deep.equal(['vip'])
    const read = await client.visitorsQuery({ visitorId: visitor })
    expect(read.attributes.plan).to.deep.equal([{ value: 'pro' }])
    expect(read.segments).to.deep.equal(['vip'])
    expect(await client.profilesAttributes({ profileId: 'ana@example.com', attributes: { tier: 'gold' } })).to.include({ profileId: 'ana@example.com' })
    await client.profilesSegments({ profileId: 'ana@example.com', assignees: ['loyal'] })
    const profile = await client.profilesQuery({ profileId: 'ana@example.com' })
    expect(profile.attributes.tier).to.deep.equal([{ value: 'gold' }])
    expect(profile.segments).to.include('loyal')
    const snapshot = await client.admin.getVisitor(tenant.account, visitor)
    expect(snapshot.attributes).to.deep.include({ plan: 'pro' })
    expect((await client.admin.getProfile(tenant.account, 'ana@example.com')).profileId).to.equal('ana@example.com')
  })

  it('identifies a visitor: the event with a signed profileId links it to the profile', async () => {
    const visitor = visitorId()
    await client.identify({ visitorId: visitor, platform: 'web', event: 'pageView', ...identified(tenant, 'bo@example.com') })
    expect((await client.visitorsQuery({ visitorId: visitor })).profileId).to.equal('bo@example.com')
    expect((await client.admin.exportProfile(tenant.account, 'bo@example.com')).visitors.map(one => one.visitorId)).to.deep.equal([visitor])
  })

  it('sends a batch with a messageId on every event, and reads them back from the event log', async () => {
    const visitor = visitorId()
    const answer = await client.eventsBatch({ events: [{ visitorId: visitor, platform: 'web', event: 'pageView', path: '/a' }, { visitorId: visitor, platform: 'web', event: 'pageView', path: '/b', messageId: 'mine-1' }] })
    expect(answer.results.map(result => result.status)).to.deep.equal([200, 200])
    const page = await client.admin.events(tenant.account, { visitorId: visitor })
    expect(page.events.map(event => event.fields.path).sort()).to.deep.equal(['/a', '/b'])
  })

  it('manages accounts, tokens, segments and webhooks', async () => {
    const created = await client.admin.createAccount({ name: 'Second shop' })
    expect(created.identitySecret).to.be.a('string')
    expect((await client.admin.updateAccount(created.account, { name: 'Second shop (EU)' })).name).to.equal('Second shop (EU)')
    expect((await client.admin.getAccount(created.account)).name).to.equal('Second shop (EU)')
    const accounts = await client.admin.all(page => client.admin.listAccounts({ ...page, limit: 1 }), 'accounts')
    expect(accounts.map(account => account.account)).to.include.members([tenant.account, created.account])
    const token = await client.admin.createToken(created.account, { name: 'backend', attributes: ['*'], access: 'read' })
    expect((await client.admin.revokeToken(created.account, token.id)).revokedAt).to.be.a('string')
    await client.admin.putSegment(created.account, 'browsers', { rule: { fact: 'count', event: 'productView', within: '7d', op: 'gte', value: 3 } })
    expect((await client.admin.getSegment(created.account, 'browsers')).name).to.equal('browsers')
    expect((await client.admin.listSegments(created.account)).segments.map(segment => segment.name)).to.deep.equal(['browsers'])
    await client.admin.putWebhook(created.account, 'crm', {
      name: 'CRM', enabled: false, trigger: { kind: 'event', events: ['purchase'] },
      request: { method: 'POST', url: 'https://crm.example.com/hooks', auth: { type: 'bearer', token: 'secret' } },
      delivery: { mode: 'async', timeoutMs: 5000, batchSize: 1 },
    } as Parameters<BeaconClient['admin']['putWebhook']>[2])
    const webhook = await client.admin.getWebhook(created.account, 'crm')
    expect(webhook.request.auth).to.deep.equal({ type: 'bearer', token: '[redacted]' })
    expect((await client.admin.listWebhooks(created.account)).webhooks.map(one => one.id)).to.deep.equal(['crm'])
    expect((await client.admin.webhookDeliveries(created.account, 'crm')).deliveries).to.deep.equal([])
    expect(await client.admin.deleteWebhook(created.account, 'crm')).to.deep.equal({ id: 'crm', deleted: true })
  })

  it('throws a typed error with the server\'s status, code and message, after one attempt', async () => {
    const error = await refusal(client.visitorsAttributes({ visitorId: 'not-a-uuid', attributes: { plan: 'x' } }))
    expect(error).to.be.instanceOf(BeaconError)
    expect(error).to.include({ status: 400, code: 'invalid_field', attempts: 1 })
    const missing = await refusal(client.admin.getCampaign(tenant.account, 'nope'))
    expect(missing).to.include({ status: 404, code: 'campaign_not_found' })
    const unknownAccount = await refusal(client.campaignsQuery({ account: '00000000-0000-4000-8000-000000000000', visitorId: visitorId(), platform: 'web', event: 'pageView' }))
    expect(unknownAccount).to.include({ status: 404, code: 'account_not_found' })
  })

  it('refuses bad options with InvalidArgumentError', () => {
    expect(() => new BeaconClient({ url: 'ftp://x' })).to.throw(InvalidArgumentError, /url\[0\]/)
    expect(() => new BeaconClient({ url: beacon.url, attempts: 0 })).to.throw(InvalidArgumentError, /attempts/)
    expect(() => new BeaconClient({ url: beacon.url, routing: 'nearest' as ClientOptions['routing'] })).to.throw(InvalidArgumentError, /routing/)
    expect(() => new BeaconClient({ url: beacon.url }).admin.listAccounts()).to.throw(InvalidArgumentError, /adminKey/)
  })

  it('applies a write once under one Idempotency-Key, and refuses the key with another body (422)', async () => {
    const visitor = visitorId()
    const purchase = { visitorId: visitor, platform: 'web', event: 'purchase', orderId: 'o-1', orderTotal: 42 }
    await client.campaignsQuery(purchase, { idempotencyKey: 'order-o-1' })
    await client.campaignsQuery(purchase, { idempotencyKey: 'order-o-1' })
    const reused = await refusal(client.campaignsQuery({ ...purchase, orderTotal: 43 }, { idempotencyKey: 'order-o-1' }))
    expect(reused).to.include({ status: 422, code: 'idempotency_key_reused' })
    const page = await client.admin.events(tenant.account, { visitorId: visitor })
    expect(page.events).to.have.length(1)
  })

  describe('retries (a real HTTP server in front of Beacon)', () => {
    let front: Front
    let waits: number[]
    let attempts: AttemptInfo[]
    let through: BeaconClient

    beforeEach(async () => {
      front = await startFront(beacon.url)
      waits = []
      attempts = []
      through = new BeaconClient({
        url: front.url, adminKey: ADMIN_KEY, account: tenant.account, token: tenant.token, routing: 'any',
        sleep: async ms => { waits.push(ms) }, onAttempt: info => attempts.push(info),
      })
    })

    afterEach(async () => {
      await through.close()
      await front.close()
    })

    it('retries a write answered 503 and a dropped connection, with the same Idempotency-Key each time, applied once', async () => {
      const unavailable = { status: 503, headers: { 'retry-after': '1' }, body: { status: 503, message: 'busy', errors: [{ code: 'unavailable', message: 'busy' }] } }
      front.script.push(unavailable, 'drop')
      const visitor = visitorId()
      const answer = await through.campaignsQuery({ visitorId: visitor, platform: 'web', event: 'pageView', path: '/retried' })
      expect(answer.status).to.equal(200)
      const keys = front.seen.filter(one => one.path === '/campaigns/query').map(one => one.headers['idempotency-key'])
      expect(keys).to.have.length(3)
      expect(new Set(keys).size).to.equal(1)
      expect(keys[0]).to.match(/^[0-9a-f-]{36}$/)
      // Retry-After: 1 is waited (at least a second), the dropped connection backs off below backoffBaseMs × 2.
      expect(waits[0]).to.be.at.least(1000)
      expect(waits[1]).to.be.below(200)
      expect(attempts.map(one => one.status)).to.deep.equal([503, null, 200])
      const page = await through.admin.events(tenant.account, { visitorId: visitor })
      expect(page.events).to.have.length(1)
    })

    it('sends a new Idempotency-Key with each call', async () => {
      await through.visitorsAttributes({ visitorId: visitorId(), attributes: { a: 1 } })
      await through.visitorsAttributes({ visitorId: visitorId(), attributes: { a: 1 } })
      const keys = front.seen.map(one => one.headers['idempotency-key'])
      expect(keys).to.have.length(2)
      expect(keys[0]).to.not.equal(keys[1])
    })

    it('honours Retry-After on 429, capped by retryAfterMaxMs', async () => {
      const limited = { status: 429, headers: { 'retry-after': '3' }, body: { status: 429, message: 'slow down', errors: [{ code: 'rate_limited', message: 'slow down' }] } }
      front.script.push(limited, limited)
      const capped = new BeaconClient({ url: front.url, account: tenant.account, token: tenant.token, routing: 'any', retryAfterMaxMs: 2000, sleep: async ms => { waits.push(ms) } })
      try {
        await capped.visitorsQuery({ visitorId: visitorId() })
      } finally {
        await capped.close()
      }
      expect(waits).to.have.length(2)
      for (const wait of waits) expect(wait).to.be.within(2000, 2100)
    })

    it('gives up after `attempts` tries with the last refusal', async () => {
      const overloaded = { status: 503, body: { status: 503, message: 'overloaded', errors: [{ code: 'overloaded', message: 'overloaded' }] } }
      front.script.push(overloaded, overloaded, overloaded, overloaded, overloaded)
      const error = await refusal(through.visitorsQuery({ visitorId: visitorId() }))
      expect(error).to.be.instanceOf(BeaconError)
      expect(error).to.include({ status: 503, code: 'overloaded', attempts: 4 })
      expect(front.seen).to.have.length(4)
    })

    it('does not retry a call that is not idempotent after a lost answer (POST /admin/accounts)', async () => {
      front.script.push('drop')
      const error = await refusal(through.admin.createAccount({ name: 'Maybe created' }))
      expect(error).to.be.instanceOf(BeaconConnectionError)
      expect(error).to.include({ code: 'connection_failed', attempts: 1 })
      expect(front.seen).to.have.length(1)
    })

    it('retries a read after a lost answer; an admin call sends the admin key', async () => {
      front.script.push('drop')
      const account = await through.admin.getAccount(tenant.account)
      expect(account.account).to.equal(tenant.account)
      expect(front.seen.map(one => one.headers.authorization)).to.deep.equal([`Bearer ${ADMIN_KEY}`, `Bearer ${ADMIN_KEY}`])
    })
  })

  describe('the route map (a real map server naming the front as every partition\'s owner)', () => {
    let front: Front
    let mapServer: Server
    let mapUrl: string
    let served: number
    let version: number

    beforeEach(async () => {
      front = await startFront(beacon.url)
      served = 0
      version = 1
      mapServer = createServer((_req, res) => {
        served++
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({
          version, partitions: 8, nodes: { 'node-a': { url: front.url } }, owners: Array.from({ length: 8 }, () => 'node-a'),
        }))
      })
      await new Promise<void>(resolve => mapServer.listen(0, '127.0.0.1', resolve))
      mapUrl = `http://127.0.0.1:${(mapServer.address() as AddressInfo).port}/cluster/routes`
    })

    afterEach(async () => {
      await front.close()
      await new Promise<void>(resolve => { mapServer.closeAllConnections(); mapServer.close(() => resolve()) })
    })

    it('sends a keyed call to the owner named by the map, and asks the map again on partition_moved before retrying', async () => {
      const attempts: AttemptInfo[] = []
      // The fallback node is Beacon itself: a call the map routes reaches the front.
      const routed = new BeaconClient({ url: beacon.url, routesUrl: mapUrl, account: tenant.account, token: tenant.token, sleep: async () => {}, onAttempt: info => attempts.push(info) })
      try {
        expect(await routed.refreshRoutes()).to.equal(1)
        const moved = { status: 503, headers: { 'retry-after': '1' }, body: { status: 503, message: 'moved', errors: [{ code: 'partition_moved', message: 'moved' }] } }
        front.script.push(moved)
        version = 2
        const before = served
        const visitor = visitorId()
        await routed.visitorsAttributes({ visitorId: visitor, attributes: { seen: true } })
        expect(served).to.equal(before + 1)
        expect(attempts.map(one => [one.node, one.routed, one.status])).to.deep.equal([[front.url, true, 503], [front.url, true, 200]])
        expect(partitionOf(tenant.account, visitor, 8)).to.be.within(0, 7)
      } finally {
        await routed.close()
      }
    })

    it('asks the map again when an answer\'s Beacon-Route names another node', async () => {
      let nowMs = 1_000_000
      const routed = new BeaconClient({ url: beacon.url, routesUrl: mapUrl, account: tenant.account, token: tenant.token, nowMs: () => nowMs })
      try {
        await routed.refreshRoutes()
        const before = served
        nowMs += 1000
        front.script.push({ pass: true, headers: { 'beacon-route': 'node-b' } })
        await routed.visitorsQuery({ visitorId: visitorId() })
        await until('the map asked again after the hint', () => served === before + 1)
      } finally {
        await routed.close()
      }
    })

    it('sends calls to any node when no map is served (embedded Beacon has no /cluster/routes)', async () => {
      const attempts: AttemptInfo[] = []
      const plain = new BeaconClient({ url: beacon.url, account: tenant.account, token: tenant.token, onAttempt: info => attempts.push(info) })
      try {
        expect(await plain.refreshRoutes()).to.equal(null)
        await plain.visitorsQuery({ visitorId: visitorId() })
        expect(attempts.map(one => [one.node, one.routed])).to.deep.equal([[beacon.url, false]])
      } finally {
        await plain.close()
      }
    })
  })
})
