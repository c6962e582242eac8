// Erasure that really erases: every device that ever carried the profile id, the deliveries log and
// dead letters of the person, and one anonymous visitor on its own.

import { expect } from 'chai'
import { open } from 'lmdb'
import { admin, createTenant, identified, post, removeDir, startBeacon, tempDir, visitorId, type BeaconProcess, type Tenant } from '../helpers/beacon.js'
import { startReceiver, type Receiver } from '../webhooks/helpers.js'
import { until } from '../helpers/until.js'
import { PROFILE_VISITORS_MAX } from '../../actors/profile.js'
import { startNatsServer, type NatsServer } from '../helpers/nats-server.js'
import { asStored, decodeRecord, encodeRecord } from '../../src/store/record-codec.js'
import { expectError } from '../helpers/errors.js'

// Profile ids may hold any character (a 4-byte one sorts after any fixed end of a key range).
const VICTIM = 'vïctim😀@example.com'

// The deliveries log is the store's under both transports: erasure scrubs it under both.
for (const transport of ['embedded', 'jetstream'] as const) {
  describe(`privacy: erasure (${transport})`, () => {
    let beacon: BeaconProcess
    let tenant: Tenant
    let receiver: Receiver
    let nats: NatsServer | null = null
    before(async () => {
      if (transport === 'jetstream') nats = await startNatsServer()
      beacon = await startBeacon({ env: { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true', ...(nats === null ? {} : { BEACON_NATS_URL: nats.url }) } })
      // Orders "o-dead-…" are refused: they end as dead letters.
      receiver = await startReceiver(request => request.body.includes('o-dead') ? { status: 422 } : { status: 200 })
    })
    after(async () => {
      await beacon.stop()
      removeDir(beacon.dataDir)
      await receiver.close()
      await nats?.close()
    })
    beforeEach(async () => {
      tenant = await createTenant(beacon.url)
      const hook = await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/webhooks/orders`, {
        name: 'orders', enabled: true, trigger: { kind: 'event', events: ['purchase'] },
        request: { method: 'POST', url: `${receiver.url}/in`, payload: '{"order": {{event.orderId}}, "who": "{{visitorId}}"}' },
        delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1, maxAttempts: 1 },
      })
      expect(hook.status).to.equal(200)
    })

    // A profileId goes with its signature (verified identity), as a site's page sends it.
    const event = (visitor: string, { profileId, ...fields }: Record<string, unknown>) =>
      post(beacon.url, '/campaigns/query', {
        account: tenant.account, visitorId: visitor, platform: 'web', event: 'pageView', ...fields, ...(typeof profileId === 'string' ? identified(tenant, profileId) : {}),
      })
    const deliveries = async (): Promise<string> =>
      JSON.stringify((await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/webhooks/orders/deliveries?limit=500`)).body.deliveries)
    async function settled (count: number): Promise<void> {
      await until(`${count} deliveries settled`, async () => {
        const all = JSON.parse(await deliveries()) as { status: string }[]
        return all.length === count && all.every(d => d.status === 'delivered' || d.status === 'dead')
      })
    }

    it('follows every device that ever carried the profile id, past the capped device list, and scrubs its deliveries', async () => {
      const real = visitorId()
      const other = visitorId()
      expect((await event(real, { profileId: VICTIM, event: 'purchase', orderId: 'o-live-1', orderTotal: 40 })).status).to.equal(200)
      expect((await event(real, { profileId: VICTIM, event: 'purchase', orderId: 'o-dead-1', orderTotal: 60 })).status).to.equal(200)
      expect((await post(beacon.url, '/visitors/attributes', { account: tenant.account, token: tenant.token, visitorId: real, attributes: { phone: '+33 6 12 34 56 78' } })).status).to.equal(200)
      // Someone else's purchase: its delivery stays.
      expect((await event(other, { event: 'purchase', orderId: 'o-other' })).status).to.equal(200)
      // Forged devices push the real one off the profile's own list.
      for (let i = 0; i < PROFILE_VISITORS_MAX; i++) expect((await event(visitorId(), { profileId: VICTIM })).status).to.equal(200)
      const before = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/profiles/${encodeURIComponent(VICTIM)}`)
      expect(before.body.visitors).not.to.include(real)
      await settled(3)
      expect(await deliveries()).to.include(real)

      const exported = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/profiles/${encodeURIComponent(VICTIM)}/export`)
      expect(exported.body.visitors.map((v: { visitorId: string }) => v.visitorId)).to.include(real)
      expect(JSON.stringify(exported.body)).to.include('+33 6 12 34 56 78')

      const erased = await admin(beacon.url, 'DELETE', `/admin/accounts/${tenant.account}/profiles/${encodeURIComponent(VICTIM)}`)
      expect(erased.status).to.equal(200)
      expect(erased.body.erased).to.deep.equal({ profiles: 1, visitors: PROFILE_VISITORS_MAX + 1, deliveries: 2 })

      const device = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/visitors/${real}`)
      expect(device.body).to.include({ profileId: null, purchases: 0, totalSpent: 0 })
      expect(device.body.attributes).to.deep.equal({})
      const log = await deliveries()
      expect(log).not.to.include(real)
      expect(log).not.to.include(VICTIM)
      expect(log).to.include('o-other')
      // The device's next event is an anonymous one: the profile is not made again.
      expect((await event(real, {})).status).to.equal(200)
      const profile = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/profiles/${encodeURIComponent(VICTIM)}`)
      expect(profile.body.visitors).to.deep.equal([])
      expect(profile.body.attributes).to.deep.equal({})
      expect((await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/profiles/${encodeURIComponent(VICTIM)}/export`)).body.visitors).to.deep.equal([])
    })

    it('keeps a device that was linked to another profile since, removing only the old link', async () => {
      const shared = visitorId()
      expect((await event(shared, { profileId: 'first' })).status).to.equal(200)
      expect((await post(beacon.url, '/visitors/attributes', { account: tenant.account, token: tenant.token, visitorId: shared, attributes: { lang: 'fr' } })).status).to.equal(200)
      expect((await event(shared, { profileId: 'second' })).status).to.equal(200)
      const erased = await admin(beacon.url, 'DELETE', `/admin/accounts/${tenant.account}/profiles/first`)
      expect(erased.body).to.deep.equal({ profileId: 'first', erased: { profiles: 1, visitors: 0, deliveries: 0 }, keptVisitors: 1 })
      const device = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/visitors/${shared}`)
      expect(device.body).to.include({ profileId: 'second' })
      expect(device.body.attributes).to.deep.equal({ lang: 'fr' })
    })

    it('DELETE …/visitors/{id} erases an anonymous visitor, its outbox and delivery traces, and its copy in a profile', async () => {
      const anon = visitorId()
      const linked = visitorId()
      expect((await event(anon, { event: 'purchase', orderId: 'o-anon' })).status).to.equal(200)
      expect((await post(beacon.url, '/visitors/attributes', { account: tenant.account, token: tenant.token, visitorId: anon, attributes: { email: 'anon@example.com' } })).status).to.equal(200)
      expect((await event(linked, { profileId: 'pat' })).status).to.equal(200)
      expect((await post(beacon.url, '/visitors/attributes', { account: tenant.account, token: tenant.token, visitorId: linked, attributes: { city: 'Lyon' } })).status).to.equal(200)
      await settled(1)

      const res = await admin(beacon.url, 'DELETE', `/admin/accounts/${tenant.account}/visitors/${anon}`)
      expect(res.status).to.equal(200)
      expect(res.body).to.deep.equal({ visitorId: anon, erased: { visitors: 1, deliveries: 1 }, unlinkedFrom: null })
      const query = await post(beacon.url, '/visitors/query', { account: tenant.account, visitorId: anon, token: tenant.token })
      expect(query.body).to.include({ status: 200 })
      expect(query.body.attributes).to.deep.equal({})
      expect(await deliveries()).not.to.include(anon)
      expectError(await admin(beacon.url, 'DELETE', `/admin/accounts/${tenant.account}/visitors/${anon}`), 'visitor_not_found')

      const unlinked = await admin(beacon.url, 'DELETE', `/admin/accounts/${tenant.account}/visitors/${linked}`)
      expect(unlinked.body).to.deep.equal({ visitorId: linked, erased: { visitors: 1, deliveries: 0 }, unlinkedFrom: 'pat' })
      const profile = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/profiles/pat`)
      expect(profile.body.visitors).to.deep.equal([])
      expect(JSON.stringify(profile.body)).not.to.include('Lyon')
      expect(JSON.stringify(profile.body)).not.to.include(linked)
      expect((await admin(beacon.url, 'DELETE', `/admin/accounts/${tenant.account}/visitors/${visitorId()}`)).status).to.equal(404)
      expectError(await admin(beacon.url, 'DELETE', `/admin/accounts/${visitorId()}/visitors/${anon}`), 'account_not_found')
    })
  })
}

describe('privacy: links made by an earlier release', () => {
  it('indexes them from the visitors at the first start, so erasure still finds a device pushed off the list', async () => {
    const dataDir = tempDir()
    try {
      let server = await startBeacon({ dataDir })
      const tenant = await createTenant(server.url)
      const real = visitorId()
      const send = (visitor: string) => post(server.url, '/campaigns/query', { account: tenant.account, visitorId: visitor, platform: 'web', event: 'pageView', ...identified(tenant, 'old-timer') })
      expect((await send(real)).status).to.equal(200)
      expect((await post(server.url, '/visitors/attributes', { account: tenant.account, token: tenant.token, visitorId: real, attributes: { phone: '555-0100' } })).status).to.equal(200)
      for (let i = 0; i < PROFILE_VISITORS_MAX; i++) expect((await send(visitorId())).status).to.equal(200)
      await server.stop()
      // As an earlier release left it: no links index, no backfill done.
      const root = open({ path: dataDir })
      const links = root.openDB('links', {})
      for (const key of links.getKeys()) await links.remove(key)
      await root.openDB('meta', {}).remove('links-backfill')
      await root.close()

      server = await startBeacon({ dataDir })
      const erased = await admin(server.url, 'DELETE', `/admin/accounts/${tenant.account}/profiles/old-timer`)
      expect(erased.body.erased.visitors).to.equal(PROFILE_VISITORS_MAX + 1)
      const device = await admin(server.url, 'GET', `/admin/accounts/${tenant.account}/visitors/${real}`)
      expect(device.body.attributes).to.deep.equal({})
      expect(device.body.profileId).to.equal(null)
      await server.stop()
    } finally {
      removeDir(dataDir)
    }
  })
})

describe('privacy: receiver error excerpts', () => {
  it('stores and shows them with credential-looking values masked, those stored by an earlier release too', async () => {
    const receiver = await startReceiver(() => ({ status: 422, body: 'rejected: db_password=hunter2 user=app' }))
    const dataDir = tempDir()
    try {
      let server = await startBeacon({ dataDir, env: { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' } })
      const tenant = await createTenant(server.url)
      expect((await admin(server.url, 'PUT', `/admin/accounts/${tenant.account}/webhooks/orders`, {
        name: 'orders', enabled: true, trigger: { kind: 'event', events: ['purchase'] },
        request: { method: 'POST', url: `${receiver.url}/in` }, delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1, maxAttempts: 1 },
      })).status).to.equal(200)
      expect((await post(server.url, '/campaigns/query', { account: tenant.account, visitorId: visitorId(), platform: 'web', event: 'purchase', orderId: 'o-1' })).status).to.equal(200)
      const dead = async (): Promise<{ attempts: { status: number, error: string }[] }[]> =>
        (await admin(server.url, 'GET', `/admin/accounts/${tenant.account}/webhooks/orders/deliveries?status=dead`)).body.deliveries
      await until('a dead delivery', async () => (await dead()).length === 1)
      expect((await dead())[0]!.attempts[0]).to.include({ status: 422, error: 'HTTP 422: rejected: db_password=*** user=app' })
      await server.stop()

      // As an earlier release stored it: the excerpt in clear, in the record and in its outcome row.
      const root = open({ path: dataDir })
      const db = root.openDB('deliveries', {})
      let rewritten = 0
      for (const { key, value } of db.getRange()) {
        const record = decodeRecord(value as Uint8Array) as { attempts: { error?: string }[] }
        if (record.attempts.length === 0) continue
        record.attempts[0]!.error = 'HTTP 422: rejected: db_password=hunter2 user=app'
        await db.put(key, asStored(encodeRecord(record)))
        rewritten++
      }
      await root.close()
      expect(rewritten).to.be.greaterThan(0)
      server = await startBeacon({ dataDir, env: { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' } })
      const shown = JSON.stringify(await dead())
      expect(shown).not.to.include('hunter2')
      expect(shown).to.include('db_password=***')
      await server.stop()
    } finally {
      removeDir(dataDir)
      await receiver.close()
    }
  })
})
