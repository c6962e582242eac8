// Deleting an account: 202 with a job, nothing of it served from then on, its data removed in the
// background in batches, progress readable, and a deletion interrupted by a crash resumes at start.

import { expect } from 'chai'
import { open } from 'lmdb'
import { admin, createTenant, identified, post, removeDir, startBeacon, tempDir, visitorId, type BeaconProcess, type Tenant } from '../helpers/beacon.js'
import { startReceiver } from '../webhooks/helpers.js'
import { until } from '../helpers/until.js'
import { DELETION_BATCH_MAX } from '../../src/jobs/account-deletion.js'
import { addUser, asUser, signIn } from '../helpers/panel.js'
import { expectError } from '../helpers/errors.js'

const DBS = ['accounts', 'tokens', 'config', 'visitors', 'profiles', 'outbox', 'expiries', 'deliveries', 'members', 'links']

/** Every key (and token record) in the data folder that names the account, the server stopped. */
async function traces (dataDir: string, account: string): Promise<string[]> {
  const root = open({ path: dataDir, readOnly: true })
  const found: string[] = []
  try {
    for (const name of DBS) {
      const db = root.openDB(name, {})
      // Values of the entity dbs use the store's shared structures: keys only, but token records name their account.
      for (const key of db.getKeys()) {
        const text = JSON.stringify(key) + (name === 'tokens' ? JSON.stringify(db.get(key)) : '')
        if (text.includes(account)) found.push(`${name} ${JSON.stringify(key)}`)
      }
    }
  } finally {
    await root.close()
  }
  return found
}

/** Visitors (half of them linked to a profile each), attributes, segments, a webhook with deliveries. */
async function populate (server: BeaconProcess, tenant: Tenant, visitors: number, receiverUrl: string): Promise<void> {
  const base = `/admin/accounts/${tenant.account}`
  expect((await admin(server.url, 'PUT', `${base}/event-types/signup`, { required: [] })).status).to.equal(200)
  expect((await admin(server.url, 'PUT', `${base}/segments/viewers`, { rule: { fact: 'count', event: 'pageView', within: '7d', op: 'gte', value: 1 } })).status).to.equal(200)
  expect((await admin(server.url, 'PUT', `${base}/campaigns/hello`, { name: 'Hello', status: 'active', priority: 1, trigger: { events: ['pageView'] }, content: {} })).status).to.equal(200)
  expect((await admin(server.url, 'PUT', `${base}/webhooks/orders`, {
    name: 'orders', enabled: true, trigger: { kind: 'event', events: ['purchase'] },
    request: { method: 'POST', url: `${receiverUrl}/in` }, delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1 },
  })).status).to.equal(200)
  const ids = Array.from({ length: visitors }, () => visitorId())
  for (let i = 0; i < ids.length; i += 50) {
    await Promise.all(ids.slice(i, i + 50).map(async (id, j) => {
      const n = i + j
      // Profile ids may hold any character: one sorts after every fixed end of a key range.
      const fields = n % 2 === 0 ? identified(tenant, n === 0 ? '😀-first' : `p-${n}`) : {}
      const res = await post(server.url, '/campaigns/query', { account: tenant.account, visitorId: id, platform: 'web', event: n % 10 === 0 ? 'purchase' : 'pageView', orderId: `o-${n}`, ...fields })
      expect(res.status).to.equal(200)
    }))
  }
}

describe('DELETE /admin/accounts/{account}', () => {
  it('answers 202 with a job, serves nothing of the account at once, and removes all its data in batches', async function () {
    this.timeout(120_000)
    const receiver = await startReceiver()
    const server = await startBeacon({ env: { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true', BEACON_DURABILITY: 'committed' } })
    try {
      const gone = await createTenant(server.url, 'Leaving')
      const kept = await createTenant(server.url, 'Staying')
      const visitors = DELETION_BATCH_MAX + 300
      await populate(server, gone, visitors, receiver.url)
      await populate(server, kept, 20, receiver.url)
      await until('deliveries made', () => receiver.requests.length >= visitors / 10)

      const res = await admin(server.url, 'DELETE', `/admin/accounts/${gone.account}`)
      expect(res.status).to.equal(202)
      expect(res.body).to.include({ account: gone.account, name: 'Leaving', state: 'running' })
      // Nothing of it is served from now on.
      const event = await post(server.url, '/campaigns/query', { account: gone.account, visitorId: visitorId(), platform: 'web', event: 'pageView' })
      expectError(event, 'account_not_found')
      expect((await post(server.url, '/visitors/query', { account: gone.account, visitorId: visitorId(), token: gone.token })).status).to.equal(404)
      expect((await admin(server.url, 'GET', `/admin/accounts/${gone.account}`)).status).to.equal(404)
      expect((await admin(server.url, 'GET', '/admin/accounts')).body.accounts.map((a: { account: string }) => a.account)).not.to.include(gone.account)
      // Deleting again answers the same job.
      expect((await admin(server.url, 'DELETE', `/admin/accounts/${gone.account}`)).body).to.include({ account: gone.account, startedAt: res.body.startedAt })

      let progress: any
      await until('the deletion done', async () => {
        progress = (await admin(server.url, 'GET', `/admin/accounts/${gone.account}/deletion`)).body
        return progress.state === 'done'
      })
      expect(progress.phase).to.equal(null)
      expect(progress.finishedAt).to.be.a('string')
      expect(progress.removed.visitors).to.equal(visitors)
      expect(progress.removed.profiles).to.equal(Math.ceil(visitors / 2))
      expect(progress.removed.links).to.equal(Math.ceil(visitors / 2))
      expect(progress.removed.tokens).to.equal(1)
      expect(progress.removed.deliveries).to.be.at.least(visitors / 10)
      expect(progress.removed.config).to.be.at.least(4)

      // The other tenant is untouched.
      const other = await post(server.url, '/campaigns/query', { account: kept.account, visitorId: visitorId(), platform: 'web', event: 'pageView' })
      expect(other.status).to.equal(200)
      expect(other.body.campaigns.map((c: { id: string }) => c.id)).to.deep.equal(['hello'])
      expectError(await admin(server.url, 'GET', `/admin/accounts/${kept.account}/deletion`), 'deletion_not_found')
      expectError(await admin(server.url, 'GET', `/admin/accounts/${visitorId()}/deletion`), 'account_not_found')
      expect((await admin(server.url, 'DELETE', `/admin/accounts/${visitorId()}`)).status).to.equal(404)
      await server.stop()
      expect(await traces(server.dataDir, gone.account)).to.deep.equal([])
      expect((await traces(server.dataDir, kept.account)).length).to.be.greaterThan(20)
    } finally {
      await server.stop()
      removeDir(server.dataDir)
      await receiver.close()
    }
  })

  it('removes the account\'s panel users at once: their sessions end, they cannot sign in, their emails are free again', async () => {
    const server = await startBeacon()
    try {
      const doomed = await createTenant(server.url)
      await addUser(server.url, doomed.account, 'owner@doomed.example', 'owner')
      await addUser(server.url, doomed.account, 'viewer@doomed.example', 'viewer')
      const cookie = (await signIn(server.url, 'owner@doomed.example')).signedIn!.cookie
      expect((await asUser(server.url, cookie, 'GET', '/admin/session')).status).to.equal(200)
      expect((await admin(server.url, 'DELETE', `/admin/accounts/${doomed.account}`)).status).to.equal(202)
      expect((await asUser(server.url, cookie, 'GET', '/admin/session')).status).to.equal(401)
      expect((await signIn(server.url, 'owner@doomed.example')).status).to.equal(401)
      const next = await createTenant(server.url)
      await addUser(server.url, next.account, 'owner@doomed.example', 'owner')
      expect((await signIn(server.url, 'owner@doomed.example')).status).to.equal(200)
    } finally {
      await server.stop()
      removeDir(server.dataDir)
    }
  })

  it('resumes a deletion a crash interrupted, from the cursor it saved', async function () {
    this.timeout(120_000)
    const receiver = await startReceiver()
    const dataDir = tempDir()
    try {
      let server = await startBeacon({ dataDir, env: { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true', BEACON_DURABILITY: 'committed' } })
      const gone = await createTenant(server.url, 'Leaving')
      await populate(server, gone, 60, receiver.url)
      await server.stop()
      // What a crash right after the 202 leaves: the account's row gone, the job at its first phase.
      const root = open({ path: dataDir })
      const account = root.openDB('accounts', {}).get(gone.account) as { name: string }
      await root.openDB('meta', {}).put(['account-deletion', gone.account], {
        account: gone.account, name: account.name, state: 'running', startedAtMs: Date.now(), finishedAtMs: null, phase: 0, after: null,
        removed: { expiries: 0, members: 0, config: 0, tokens: 0, outbox: 0, deliveries: 0, links: 0, visitors: 0, profiles: 0 },
      })
      await root.openDB('accounts', {}).remove(gone.account)
      await root.close()

      server = await startBeacon({ dataDir, env: { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' } })
      expect((await post(server.url, '/visitors/query', { account: gone.account, visitorId: visitorId(), token: gone.token })).status).to.equal(404)
      await until('the deletion done', async () => (await admin(server.url, 'GET', `/admin/accounts/${gone.account}/deletion`)).body.state === 'done')
      const progress = (await admin(server.url, 'GET', `/admin/accounts/${gone.account}/deletion`)).body
      expect(progress.removed.visitors).to.equal(60)
      await server.stop()
      expect(await traces(dataDir, gone.account)).to.deep.equal([])
    } finally {
      removeDir(dataDir)
      await receiver.close()
    }
  })
})
