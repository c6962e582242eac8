import { expect } from 'chai'
import { admin, createTenant, discardBeacon, post, removeDir, startBeacon, tempDir, type BeaconProcess, type Tenant } from '../helpers/beacon.js'
import { addUser, asUser, signIn } from '../helpers/panel.js'
import { AuditLog, AUDIT_KEEP } from '../../src/audit/audit-log.js'
import { Store } from '../../src/store/store.js'
import { systemClock } from '../../src/clock.js'
import { startInProcess, type InProcess } from '../helpers/in-process.js'

describe('audit log', () => {
  let beacon: BeaconProcess
  let a: Tenant

  before(async () => {
    beacon = await startBeacon()
    a = await createTenant(beacon.url, 'Audited')
  })
  after(() => discardBeacon(beacon))

  const entries = async (query = ''): Promise<any> => (await admin(beacon.url, 'GET', `/admin/accounts/${a.account}/audit${query}`)).body

  it('writes one entry per change, with the key or a session, newest first: actor, action, entity, id, before → after', async () => {
    const user = await addUser(beacon.url, a.account, 'olga@example.com', 'owner')
    const { cookie } = (await signIn(beacon.url, 'olga@example.com')).signedIn!
    const path = `/admin/accounts/${a.account}/campaigns/sale`
    const campaign = { name: 'Sale', status: 'active', priority: 1, trigger: { events: ['pageView'] }, content: { html: 'hi' } }
    expect((await admin(beacon.url, 'PUT', path, campaign)).status).to.equal(200)
    expect((await asUser(beacon.url, cookie, 'PUT', path, { ...campaign, status: 'paused' })).status).to.equal(200)
    // Reads and refusals write nothing.
    await admin(beacon.url, 'GET', path)
    await asUser(beacon.url, cookie, 'PUT', path, { name: 1 })
    expect((await asUser(beacon.url, cookie, 'DELETE', path)).status).to.equal(200)
    const { entries: list, next } = await entries()
    expect(next).to.equal(null)
    const [deleted, updated, created, signedIn, userCreated] = list
    expect(deleted).to.include({ action: 'delete', entity: 'campaign', entityId: 'sale' })
    expect(deleted.actor).to.deep.equal({ type: 'user', id: user.id, email: 'olga@example.com' })
    expect(updated).to.include({ action: 'update', entity: 'campaign', entityId: 'sale', summary: 'status: "active" → "paused"' })
    expect(created).to.include({ action: 'create', entity: 'campaign', entityId: 'sale' })
    expect(created.actor).to.deep.equal({ type: 'admin' })
    expect(created.summary).to.include('name="Sale"')
    // A replacement that drops a field says so.
    await admin(beacon.url, 'PUT', path, { ...campaign, frequencyCap: { max: 1, per: 'day' } })
    await admin(beacon.url, 'PUT', path, { ...campaign, priority: 2 })
    const [dropped] = (await entries('?limit=1')).entries
    expect(dropped.summary).to.equal('priority: 1 → 2, frequencyCap: {"max":1,"per":"day"} → (none)')
    expect(signedIn).to.include({ action: 'sign-in', entity: 'user', entityId: user.id })
    expect(userCreated).to.include({ action: 'create', entity: 'user', entityId: user.id })
    expect(userCreated.summary).not.to.match(/password|horse/)
    expect(Date.parse(deleted.at)).to.be.at.least(Date.parse(userCreated.at))
    expect(list.length).to.be.greaterThan(5)
  })

  it('never writes a secret into a summary, however deep (webhook auth, signing secret, passwords)', async () => {
    const hook = {
      name: 'CRM', enabled: true, trigger: { kind: 'event', events: ['purchase'] },
      request: { method: 'POST', url: 'https://x.io', auth: { type: 'bearer', token: 'tok-SECRET-1' }, signingSecret: 'whsec_' + Buffer.alloc(32, 7).toString('base64'), headers: { 'X-Api-Key': 'key-SECRET-2' } },
      delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1 },
    }
    expect((await admin(beacon.url, 'PUT', `/admin/accounts/${a.account}/webhooks/crm`, hook)).status).to.equal(200)
    expect((await admin(beacon.url, 'PUT', `/admin/accounts/${a.account}/webhooks/crm`, { ...hook, request: { ...hook.request, auth: { type: 'bearer', token: 'tok-SECRET-3' } } })).status).to.equal(200)
    const text = JSON.stringify((await entries('?limit=5')).entries)
    expect(text).to.include('"entityId":"crm"')
    expect(text).not.to.match(/SECRET|whsec_/)
  })

  it('records a user\'s role and password change as an update, naming the password without its value', async () => {
    const user = await addUser(beacon.url, a.account, 'pat@example.com', 'viewer')
    await admin(beacon.url, 'PATCH', `/admin/accounts/${a.account}/users/${user.id}`, { role: 'editor', password: 'another fine password' })
    const [entry] = (await entries('?limit=1')).entries
    expect(entry).to.include({ action: 'update', entity: 'user', entityId: user.id, summary: 'role → "editor", password changed' })
  })

  it('records an erasure without what was erased: the counts, not the attributes', async () => {
    await post(beacon.url, '/profiles/attributes', { account: a.account, token: a.token, profileId: 'erase-me@example.com', attributes: { phone: '+33 6 12 34 56 78' } })
    expect((await admin(beacon.url, 'DELETE', `/admin/accounts/${a.account}/profiles/erase-me%40example.com`)).status).to.equal(200)
    const [entry] = (await entries('?limit=1')).entries
    expect(entry).to.include({ action: 'erase', entity: 'profile', entityId: 'erase-me@example.com' })
    expect(entry.summary).to.include('erased=')
    expect(entry.summary).not.to.include('+33')
  })

  it('pages with limit and cursor, and refuses a bad cursor or limit with 400', async () => {
    for (const name of ['one', 'two', 'three']) await admin(beacon.url, 'PUT', `/admin/accounts/${a.account}/event-types/${name}`, { required: [] })
    const first = await entries('?limit=2')
    expect(first.entries.map((e: { entityId: string }) => e.entityId)).to.deep.equal(['three', 'two'])
    const second = await entries(`?limit=2&cursor=${first.next}`)
    expect(second.entries[0].entityId).to.equal('one')
    const all = await entries('?limit=200')
    expect([...first.entries, ...second.entries].map((e: { id: string }) => e.id)).to.deep.equal(all.entries.slice(0, 4).map((e: { id: string }) => e.id))
    expect((await admin(beacon.url, 'GET', `/admin/accounts/${a.account}/audit?cursor=abc`)).status).to.equal(400)
    expect((await admin(beacon.url, 'GET', `/admin/accounts/${a.account}/audit?limit=0`)).status).to.equal(400)
  })

  it('keeps an account\'s entries apart, and records token revocation and erasure with their own actions', async () => {
    const b = await createTenant(beacon.url, 'Other')
    const tokens = await admin(beacon.url, 'GET', `/admin/accounts/${b.account}/tokens`)
    await admin(beacon.url, 'DELETE', `/admin/accounts/${b.account}/tokens/${tokens.body.tokens[0].id}`)
    const theirs = (await admin(beacon.url, 'GET', `/admin/accounts/${b.account}/audit`)).body.entries
    expect(theirs.map((e: { action: string, entity: string }) => `${e.action} ${e.entity}`)).to.deep.equal(['revoke token', 'create token', 'create account'])
    expect(theirs[0].summary).to.include('name="all"')
    expect(theirs[0].summary).not.to.include('hash')
    const ours = (await entries('?limit=200')).entries
    expect(ours.some((e: { entityId: string }) => e.entityId === tokens.body.tokens[0].id)).to.equal(false)
  })
})

describe('audit log bound', () => {
  it(`keeps the latest ${AUDIT_KEEP} entries of an account`, async () => {
    const dir = tempDir()
    const store = new Store({ path: dir, durability: 'committed' })
    try {
      const audit = new AuditLog(store, systemClock)
      // In batches of 500 (one commit each), as a busy account's changes would come.
      for (let from = 0; from < AUDIT_KEEP + 150; from += 500) {
        const writes: Promise<void>[] = []
        for (let i = from; i < Math.min(from + 500, AUDIT_KEEP + 150); i++) writes.push(audit.append('acc', { actor: { type: 'admin' }, action: 'update', entity: 'campaign', entityId: String(i), summary: '' }))
        await Promise.all(writes)
      }
      await store.root.flushed
      const count = store.audit.getKeysCount({ start: ['acc', 0], end: ['acc', Number.MAX_SAFE_INTEGER] })
      expect(count).to.be.at.most(AUDIT_KEEP + 100).and.at.least(AUDIT_KEEP)
      expect(audit.list('acc', 1, null).entries[0]!.entityId).to.equal(String(AUDIT_KEEP + 149))
    } finally {
      await store.close()
      removeDir(dir)
    }
  })
})

describe('audit log summaries (issue 27)', () => {
  let node: InProcess
  let a: Tenant

  before(async () => {
    node = await startInProcess()
    a = await createTenant(node.url, 'Summaries')
  })
  after(async () => { await node.close() })

  const latest = async (): Promise<{ summary: string }> => (await admin(node.url, 'GET', `/admin/accounts/${a.account}/audit?limit=1`)).body.entries[0]

  it('redacts what GET redacts: a webhook header named like a credential (Cookie) keeps its value out', async () => {
    const hook = {
      name: 'CRM', enabled: true, trigger: { kind: 'event', events: ['purchase'] },
      // Headers first: a summary shortens each value to 40 characters, and the cookie is within them.
      request: { headers: { Cookie: 'sid=LEAK1' }, method: 'POST', url: 'https://x.io' },
      delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1 },
    }
    const path = `/admin/accounts/${a.account}/webhooks/crm`
    expect((await admin(node.url, 'PUT', path, hook)).status).to.equal(200)
    expect((await admin(node.url, 'GET', path)).body.request.headers.Cookie).to.equal('[redacted]')
    const created = await latest()
    expect(created.summary).to.include('name="CRM"')
    expect(created.summary).not.to.include('LEAK1')
    expect((await admin(node.url, 'PUT', path, { ...hook, name: 'CRM 2', request: { ...hook.request, headers: { Cookie: 'sid=LEAK2' } } })).status).to.equal(200)
    const updated = await latest()
    expect(updated.summary).to.include('name: "CRM" → "CRM 2"')
    expect(updated.summary).not.to.match(/LEAK1|LEAK2/)
  })

  it('summarizes a PATCH by the fields it changed, never the untouched ones as removed', async () => {
    expect((await admin(node.url, 'PATCH', `/admin/accounts/${a.account}`, { name: 'Renamed' })).status).to.equal(200)
    expect((await latest()).summary).to.equal('name: "Summaries" → "Renamed"')
    expect((await admin(node.url, 'PATCH', `/admin/accounts/${a.account}`, { name: 'Renamed', identityVerification: 'off' })).status).to.equal(200)
    expect((await latest()).summary).to.equal('identityVerification: "required" → "off"')
  })

  it('summarizes a destination PATCH by what it changed: no untouched field, no credential', async () => {
    const path = `/admin/accounts/${a.account}/destinations/meta`
    const created = await admin(node.url, 'PUT', path, {
      type: 'meta-capi', name: 'Meta', enabled: true, events: ['purchase'], credentials: { accessToken: 'LEAK-TOKEN' }, settings: { pixelId: '123', apiBaseUrl: 'https://graph.example' },
    })
    expect(created.status, JSON.stringify(created.body)).to.equal(200)
    expect((await admin(node.url, 'PATCH', path, { enabled: false })).status).to.equal(200)
    expect((await latest()).summary).to.equal('enabled: true → false')
    expect((await admin(node.url, 'PATCH', path, { name: 'Meta', credentials: { accessToken: 'LEAK-TOKEN-2' } })).status).to.equal(200)
    const summary = (await latest()).summary
    expect(summary).to.equal('credentials changed')
    expect(summary).not.to.match(/LEAK|name|events|settings|removed|\(none\)/)
  })
})
