import { expect } from 'chai'
import { admin, ADMIN_KEY, createTenant, discardBeacon, removeDir, startBeacon, tempDir, type BeaconProcess, type Tenant } from '../helpers/beacon.js'
import { manualClock } from '../helpers/clock.js'
import { startInProcess, type InProcess } from '../helpers/in-process.js'
import { addUser, asUser, PASSWORD, signIn } from '../helpers/panel.js'
import { rolesAllowed } from '../../src/http/access.js'
import { SIGN_IN_LIMITS } from '../../src/users/sign-in-limit.js'
import { Access } from '../../src/http/access.js'
import type { GuardRequest, Route } from '../../src/http/server.js'
import { Store } from '../../src/store/store.js'
import { Users } from '../../src/users/users.js'
import { Sessions } from '../../src/users/sessions.js'
import { expectError } from '../helpers/errors.js'

/** A path of the route with the account filled in and every other parameter a name that exists nowhere. */
function pathOf (route: Route, account: string): string {
  return route.pattern.replace(':account', account).replace(/:[a-z]+/gi, 'nope')
}

describe('panel access: sessions and roles', () => {
  let node: InProcess
  let a: Tenant
  let b: Tenant
  let doomed: Tenant
  const cookies: Record<string, string> = {}

  before(async () => {
    node = await startInProcess(undefined, { BEACON_SESSION_TTL_MS: '3600000' })
    a = await createTenant(node.url, 'A')
    b = await createTenant(node.url, 'B')
    doomed = await createTenant(node.url, 'C')
    for (const role of ['viewer', 'editor', 'owner']) {
      await addUser(node.url, a.account, `${role}@a.example`, role)
      cookies[role] = (await signIn(node.url, `${role}@a.example`)).signedIn!.cookie
    }
    await addUser(node.url, b.account, 'owner@b.example', 'owner')
    cookies.stranger = (await signIn(node.url, 'owner@b.example')).signedIn!.cookie
  })
  after(async () => { await node.close() })

  it('walks every admin route with every role: allowed roles are never refused (403), the others get 403 role_forbidden', async () => {
    const routes = node.beacon.routes.filter(route => route.pattern.startsWith('/admin') && route.role !== 'public')
    expect(routes.length).to.be.greaterThan(30)
    const failures: string[] = []
    for (const route of routes) {
      const method = route.method === 'del' ? 'DELETE' : route.method.toUpperCase()
      // Deleting an account is tried on one made for it (the walk goes on with A).
      const path = pathOf(route, route.method === 'del' && route.pattern === '/admin/accounts/:account' ? doomed.account : a.account)
      const body = route.body === true ? {} : undefined
      const raw = route.body === 'raw' ? Buffer.from('not an image') : undefined
      const allowed = rolesAllowed(route.role)
      for (const who of ['viewer', 'editor', 'owner', 'stranger']) {
        const res = await asUser(node.url, cookies[who]!, method, path, body, raw === undefined ? {} : { raw })
        const may = who !== 'stranger' && (allowed as string[]).includes(who)
        if (may && (res.status === 403 || res.status === 401)) failures.push(`${who} ${method} ${route.pattern}: ${res.status} ${JSON.stringify(res.body)}`)
        if (!may && (res.status !== 403 || (res.body as { errors: { code: string }[] }).errors[0]!.code !== 'role_forbidden')) {
          failures.push(`${who} ${method} ${route.pattern}: expected 403 role_forbidden, got ${res.status}`)
        }
      }
      const key = await fetch(node.url + path, {
        method, headers: { authorization: `Bearer ${ADMIN_KEY}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, body: raw ?? (body === undefined ? undefined : '{}'),
      })
      if (key.status === 403 || key.status === 401) failures.push(`admin key ${method} ${route.pattern}: ${key.status}`)
      const none = await fetch(node.url + path, { method })
      if (none.status !== 401) failures.push(`nobody ${method} ${route.pattern}: ${none.status}`)
    }
    expect(failures).to.deep.equal([])
  })

  it('states the contract\'s roles: viewers read but not tokens, users or exports; editors configure; owners manage; an unclassified route is owner-only', async () => {
    expect(rolesAllowed(undefined)).to.deep.equal(['owner'])
    expect(rolesAllowed('admin')).to.deep.equal([])
    const roleOf = (method: string, pattern: string): string | undefined => node.beacon.routes.find(r => r.method === method && r.pattern === pattern)?.role
    expect(roleOf('get', '/admin/accounts/:account/campaigns')).to.equal('viewer')
    expect(roleOf('get', '/admin/accounts/:account/tokens')).to.equal('owner')
    expect(roleOf('get', '/admin/accounts/:account/users')).to.equal('owner')
    expect(roleOf('get', '/admin/accounts/:account/profiles/:profileId/export')).to.equal('owner')
    expect(roleOf('put', '/admin/accounts/:account/campaigns/:id')).to.equal('editor')
    expect(roleOf('patch', '/admin/accounts/:account')).to.equal('owner')
    expect(roleOf('post', '/admin/accounts')).to.equal('admin')
    const campaign = { name: 'Sale', status: 'active', priority: 1, trigger: { events: ['pageView'] }, content: { html: 'hi' } }
    expect((await asUser(node.url, cookies.viewer!, 'PUT', `/admin/accounts/${a.account}/campaigns/sale`, campaign)).status).to.equal(403)
    expect((await asUser(node.url, cookies.editor!, 'PUT', `/admin/accounts/${a.account}/campaigns/sale`, campaign)).status).to.equal(200)
    expect((await asUser(node.url, cookies.viewer!, 'GET', `/admin/accounts/${a.account}/campaigns/sale`)).status).to.equal(200)
    expect((await asUser(node.url, cookies.stranger!, 'GET', `/admin/accounts/${a.account}/campaigns/sale`)).status).to.equal(403)
    expect((await asUser(node.url, cookies.owner!, 'GET', '/admin/accounts')).status).to.equal(403)
  })

  it('GET /admin/session tells who is signed in; 401 admin_unauthorized without a session', async () => {
    const me = await asUser(node.url, cookies.editor!, 'GET', '/admin/session')
    expect(me.status).to.equal(200)
    expect(me.body.user).to.include({ email: 'editor@a.example', role: 'editor', account: a.account })
    expect(me.body.user).to.have.all.keys('id', 'account', 'email', 'name', 'role', 'createdAt')
    const none = await fetch(node.url + '/admin/session')
    expect(none.status).to.equal(401)
    expect(((await none.json()) as { errors: { code: string }[] }).errors[0]!.code).to.equal('admin_unauthorized')
  })

  it('sets the session cookie HttpOnly, SameSite=Strict, Path=/, Max-Age; Secure behind https (X-Forwarded-Proto)', async () => {
    await addUser(node.url, a.account, 'cookie@a.example', 'viewer')
    const plain = await signIn(node.url, 'cookie@a.example')
    expect(plain.signedIn!.setCookie).to.match(/^beacon_session=[A-Za-z0-9_-]{43}; HttpOnly; SameSite=Strict; Path=\/; Max-Age=3600$/)
    const https = await signIn(node.url, 'cookie@a.example', PASSWORD, { 'x-forwarded-proto': 'https' })
    expect(https.signedIn!.setCookie).to.match(/; HttpOnly; SameSite=Strict; Path=\/; Max-Age=3600; Secure$/)
  })

  it('refuses a change made with a session without the site\'s own Origin (403 csrf_refused), and changes nothing', async () => {
    const path = `/admin/accounts/${a.account}/event-types/signup`
    const missing = await asUser(node.url, cookies.owner!, 'PUT', path, { required: [] }, { origin: null })
    expectError(missing, 'csrf_refused')
    const wrong = await asUser(node.url, cookies.owner!, 'PUT', path, { required: [] }, { origin: 'https://evil.example' })
    expectError(wrong, 'csrf_refused')
    // Behind https the own origin is https://host: the plain http origin is another site.
    const scheme = await asUser(node.url, cookies.owner!, 'PUT', path, { required: [] }, { headers: { 'x-forwarded-proto': 'https' } })
    expectError(scheme, 'csrf_refused')
    expect((await admin(node.url, 'GET', path)).status).to.equal(404)
    const host = new URL(node.url).host
    expect((await asUser(node.url, cookies.owner!, 'PUT', path, { required: [] }, { origin: `https://${host}`, headers: { 'x-forwarded-proto': 'https' } })).status).to.equal(200)
    // Reads need no Origin; the admin key needs none either.
    expect((await asUser(node.url, cookies.owner!, 'GET', path, undefined, { origin: null })).status).to.equal(200)
    expect((await admin(node.url, 'DELETE', path)).status).to.equal(200)
  })

  it('ends a session at sign-out (the same cookie is refused afterwards) and clears the cookie', async () => {
    await addUser(node.url, a.account, 'leaving@a.example', 'editor')
    const { cookie } = (await signIn(node.url, 'leaving@a.example')).signedIn!
    const out = await asUser(node.url, cookie, 'DELETE', '/admin/session')
    expect(out.status).to.equal(204)
    expect(out.headers.get('set-cookie')).to.match(/^beacon_session=; HttpOnly; SameSite=Strict; Path=\/; Max-Age=0$/)
    expect((await asUser(node.url, cookie, 'GET', '/admin/session')).status).to.equal(401)
    expect((await asUser(node.url, cookie, 'GET', `/admin/accounts/${a.account}/campaigns`)).status).to.equal(401)
  })

  it('ends every session of a removed user at once', async () => {
    const user = await addUser(node.url, a.account, 'removed@a.example', 'editor')
    const one = (await signIn(node.url, 'removed@a.example')).signedIn!.cookie
    const two = (await signIn(node.url, 'removed@a.example')).signedIn!.cookie
    expect((await asUser(node.url, cookies.owner!, 'DELETE', `/admin/accounts/${a.account}/users/${user.id}`)).status).to.equal(204)
    for (const cookie of [one, two]) expect((await asUser(node.url, cookie, 'GET', `/admin/accounts/${a.account}/campaigns`)).status).to.equal(401)
    expect((await signIn(node.url, 'removed@a.example')).status).to.equal(401)
  })

  it('ends the sessions of a user whose password changed', async () => {
    const user = await addUser(node.url, a.account, 'rotated@a.example', 'viewer')
    const { cookie } = (await signIn(node.url, 'rotated@a.example')).signedIn!
    expect((await asUser(node.url, cookies.owner!, 'PATCH', `/admin/accounts/${a.account}/users/${user.id}`, { password: 'a brand new password' })).status).to.equal(200)
    expect((await asUser(node.url, cookie, 'GET', '/admin/session')).status).to.equal(401)
    expect((await signIn(node.url, 'rotated@a.example', 'a brand new password')).status).to.equal(200)
  })

  it('ends a session BEACON_SESSION_TTL_MS after sign-in', async () => {
    await addUser(node.url, a.account, 'expiring@a.example', 'viewer')
    const { cookie } = (await signIn(node.url, 'expiring@a.example')).signedIn!
    node.clock.advance(3_600_000 - 1)
    expect((await asUser(node.url, cookie, 'GET', '/admin/session')).status).to.equal(200)
    node.clock.advance(1)
    expect((await asUser(node.url, cookie, 'GET', '/admin/session')).status).to.equal(401)
  })

  it('refuses the sessions of a suspended account until it is active again', async () => {
    const c = await createTenant(node.url, 'Suspended')
    await addUser(node.url, c.account, 'owner@c.example', 'owner')
    const { cookie } = (await signIn(node.url, 'owner@c.example')).signedIn!
    await admin(node.url, 'PATCH', `/admin/accounts/${c.account}`, { suspended: true })
    expect((await asUser(node.url, cookie, 'GET', `/admin/accounts/${c.account}/campaigns`)).status).to.equal(401)
    expect((await signIn(node.url, 'owner@c.example')).status).to.equal(401)
    await admin(node.url, 'PATCH', `/admin/accounts/${c.account}`, { suspended: false })
    expect((await asUser(node.url, cookie, 'GET', `/admin/accounts/${c.account}/campaigns`)).status).to.equal(200)
  })

  // issue 27: all-space and common passwords were accepted, and emails with invisible characters.
  it('refuses a password of only spaces or a common one, and an email with an invisible character (400 invalid_field)', async () => {
    const users = `/admin/accounts/${a.account}/users`
    const create = (email: string, password: string): Promise<{ status: number, body: any }> => admin(node.url, 'POST', users, { email, password, role: 'viewer' })
    for (const password of [' '.repeat(12), '\t'.repeat(12), '\u3000'.repeat(12), 'Password1234', 'PASSWORD 1234', 'qwerty123456', '1234567890123', 'zzzzzzzzzzzz']) {
      const refused = await create('weak@a.example', password)
      expect(refused.status, JSON.stringify(password)).to.equal(400)
      expect(refused.body.errors[0]).to.include({ code: 'invalid_field', field: '/password' })
    }
    for (const email of ['ana\u200b@a.example', 'ana@a.exa\u200dmple', '\u202eana@a.example', 'ana\u2066@a.example', 'an\u00ada@a.example', 'ana\ufeff@a.example']) {
      const refused = await create(email, 'a fine long password')
      expect(refused.status, JSON.stringify(email)).to.equal(400)
      expect(refused.body.errors[0]).to.include({ code: 'invalid_field', field: '/email' })
    }
    const user = await create('fine@a.example', 'a fine long password')
    expect(user.status).to.equal(201)
    const patched = await admin(node.url, 'PATCH', `${users}/${user.body.id}`, { password: ' '.repeat(20) })
    expect(patched.status).to.equal(400)
    expect(patched.body.errors[0]).to.include({ code: 'invalid_field', field: '/password' })
  })

  // issue 27: an owner removed the operator's rate limit with PATCH {"rateLimit": {"perSecond": 0}}.
  it('lets an owner lower the rate the admin key set, never raise or remove it (403 role_forbidden)', async () => {
    const path = `/admin/accounts/${a.account}`
    // A session of its own: an earlier test moves the clock past the shared sessions' expiry.
    await addUser(node.url, a.account, 'rate-owner@a.example', 'owner')
    const { cookie } = (await signIn(node.url, 'rate-owner@a.example')).signedIn!
    const owner = (body: unknown): ReturnType<typeof asUser> => asUser(node.url, cookie, 'PATCH', path, body)
    try {
      expect((await admin(node.url, 'PATCH', path, { rateLimit: { perSecond: 100, burst: 100 } })).status).to.equal(200)
      for (const raised of [{ perSecond: 0 }, { perSecond: 101 }, { perSecond: 100, burst: 1000 }]) {
        const refused = await owner({ rateLimit: raised })
        expectError(refused, 'role_forbidden')
      }
      expect((await admin(node.url, 'GET', path)).body.rateLimit).to.deep.equal({ perSecond: 100, burst: 100 })
      expect((await owner({ rateLimit: { perSecond: 50 } })).body.rateLimit).to.deep.equal({ perSecond: 50 })
      expect((await owner({ rateLimit: { perSecond: 100 } })).body.rateLimit, 'back up to the operator\'s rate').to.deep.equal({ perSecond: 100 })
      expect((await owner({ rateLimit: null })).body.rateLimit, 'null: the operator\'s rate').to.deep.equal({ perSecond: 100, burst: 100 })
      // Without an operator's rate (and BEACON_ACCOUNT_RATE_PER_SECOND unlimited) an owner sets any.
      expect((await admin(node.url, 'PATCH', path, { rateLimit: null })).body).not.to.have.property('rateLimit')
      expect((await owner({ rateLimit: { perSecond: 0 } })).body.rateLimit).to.deep.equal({ perSecond: 0 })
    } finally {
      await admin(node.url, 'PATCH', path, { rateLimit: null })
    }
  })

  it('a role change applies to the live session at once', async () => {
    const user = await addUser(node.url, a.account, 'promoted@a.example', 'viewer')
    const { cookie } = (await signIn(node.url, 'promoted@a.example')).signedIn!
    const path = `/admin/accounts/${a.account}/event-types/promo`
    expect((await asUser(node.url, cookie, 'PUT', path, { required: [] })).status).to.equal(403)
    expect((await admin(node.url, 'PATCH', `/admin/accounts/${a.account}/users/${user.id}`, { role: 'editor' })).body.role).to.equal('editor')
    expect((await asUser(node.url, cookie, 'PUT', path, { required: [] })).status).to.equal(200)
  })
})

describe('POST /admin/session: the sign-in limit under a burst', () => {
  let node: InProcess
  let a: Tenant

  before(async () => {
    node = await startInProcess()
    a = await createTenant(node.url, 'Burst')
  })
  after(async () => { await node.close() })

  // issue 27: the limit was checked before scrypt and counted after it, so a burst was all tried.
  it('tries at most the per-email limit of 60 wrong passwords and a right one sent at once; the rest get 429', async () => {
    await addUser(node.url, a.account, 'burst@a.example', 'viewer')
    const attempts = [...Array.from({ length: 60 }, () => 'a wrong but long password'), PASSWORD]
    const answers = await Promise.all(attempts.map(password => signIn(node.url, 'burst@a.example', password)))
    const statuses = answers.map(answer => answer.status)
    const tried = statuses.filter(status => status === 401 || status === 200)
    expect(tried.length, JSON.stringify(statuses)).to.be.at.most(SIGN_IN_LIMITS.perEmail).and.above(0)
    expect(statuses.filter(status => status === 429).length, JSON.stringify(statuses)).to.equal(attempts.length - tried.length)
    // The window ends: the right password signs in, and a success gives the address its attempts back.
    node.clock.advance(SIGN_IN_LIMITS.windowMs)
    expect((await signIn(node.url, 'burst@a.example')).status).to.equal(200)
    for (let i = 0; i < SIGN_IN_LIMITS.perAddress; i++) expect((await signIn(node.url, `ok${i}@a.example`, 'a wrong but long password')).status, `failure ${i + 1}`).to.equal(401)
    expect((await signIn(node.url, 'another@a.example', 'a wrong but long password')).status).to.equal(429)
  })
})

describe('a route added without a role', () => {
  it('is open to owners and the admin key only: editors and viewers get 403 role_forbidden', async () => {
    const dir = tempDir()
    const store = new Store({ path: dir, durability: 'committed' })
    try {
      const clock = manualClock()
      const sessions = new Sessions(store, clock, 60_000)
      const users = new Users(store, clock, sessions)
      const access = new Access({ adminKey: ADMIN_KEY, users, sessions, accountActive: () => true })
      const route: Route = { method: 'post', pattern: '/admin/accounts/:account/something-new', body: true, handler: () => ({ status: 204, body: undefined }) }
      const guard = access.guardFor(route)
      const request = (cookie: string, authorization = ''): GuardRequest => ({
        method: 'post', url: '/admin/accounts/acc/something-new', params: ['acc'], authorization, query: '', origin: 'http://beacon.test', cookie,
        host: 'beacon.test', ifNoneMatch: '', forwardedProto: '', forwardedFor: '', userAgent: '', contentType: 'application/json', idempotencyKey: '', forwardedKey: '', remoteAddress: '127.0.0.1',
      })
      const refused = (cookie: string): string => {
        try {
          guard(request(cookie))
          return 'allowed'
        } catch (error) {
          return (error as { items: { code: string }[] }).items[0]!.code
        }
      }
      const cookieOf = async (role: 'viewer' | 'editor' | 'owner'): Promise<string> => {
        const user = await users.create('acc', { email: `${role}@new.example`, password: 'long enough password', role })
        return `beacon_session=${await sessions.create(user.id)}`
      }
      expect(refused(await cookieOf('viewer'))).to.equal('role_forbidden')
      expect(refused(await cookieOf('editor'))).to.equal('role_forbidden')
      expect(refused(await cookieOf('owner'))).to.equal('allowed')
      expect(guard(request('', `Bearer ${ADMIN_KEY}`))).to.deep.equal({ type: 'admin' })
      expect(refused('')).to.equal('admin_unauthorized')
    } finally {
      await store.close()
      removeDir(dir)
    }
  })
})

describe('panel users and sign-in (real process)', () => {
  let beacon: BeaconProcess
  let a: Tenant

  before(async () => {
    beacon = await startBeacon()
    a = await createTenant(beacon.url, 'Users')
  })
  after(() => discardBeacon(beacon))

  it('creates, lists, patches and deletes users; emails are unique across the instance (409); passwords are never shown', async () => {
    const created = await admin(beacon.url, 'POST', `/admin/accounts/${a.account}/users`, { email: 'Ana@Example.com', name: 'Ana', password: PASSWORD, role: 'owner' })
    expect(created.status).to.equal(201)
    expect(created.body).to.have.all.keys('id', 'account', 'email', 'name', 'role', 'createdAt')
    expect(created.body).to.include({ email: 'ana@example.com', name: 'Ana', role: 'owner', account: a.account })
    const other = await createTenant(beacon.url, 'Other')
    const taken = await admin(beacon.url, 'POST', `/admin/accounts/${other.account}/users`, { email: 'ana@example.COM', password: PASSWORD, role: 'viewer' })
    expectError(taken, 'conflict')
    const short = await admin(beacon.url, 'POST', `/admin/accounts/${a.account}/users`, { email: 'bo@example.com', password: 'short', role: 'viewer' })
    expect(short.status).to.equal(400)
    const badRole = await admin(beacon.url, 'POST', `/admin/accounts/${a.account}/users`, { email: 'bo@example.com', password: PASSWORD, role: 'god' })
    expect(badRole.status).to.equal(400)
    const listed = await admin(beacon.url, 'GET', `/admin/accounts/${a.account}/users`)
    expect(listed.body.users.map((u: { email: string }) => u.email)).to.deep.equal(['ana@example.com'])
    expect(JSON.stringify(listed.body)).not.to.match(/scrypt|password/i)
    const patched = await admin(beacon.url, 'PATCH', `/admin/accounts/${a.account}/users/${created.body.id}`, { name: 'Ana B', password: 'another long password' })
    expect(patched.body).to.include({ name: 'Ana B' })
    expect((await signIn(beacon.url, 'ana@example.com')).status).to.equal(401)
    expect((await signIn(beacon.url, 'ANA@example.com', 'another long password')).status).to.equal(200)
    // The last owner stays.
    const last = await admin(beacon.url, 'DELETE', `/admin/accounts/${a.account}/users/${created.body.id}`)
    expect(last.status).to.equal(409)
    const missing = await admin(beacon.url, 'DELETE', `/admin/accounts/${a.account}/users/nobody`)
    expectError(missing, 'user_not_found')
  })

  it('refuses a malformed sign-in with 400, without counting it as a failed attempt', async () => {
    for (const body of [{}, { email: 'x@example.com' }, { email: 'x@example.com', password: 5 }, { email: 'x@example.com', password: 'p', extra: 1 }]) {
      const res = await fetch(beacon.url + '/admin/session', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
      expect(res.status, JSON.stringify(body)).to.equal(400)
    }
    const text = await fetch(beacon.url + '/admin/session', { method: 'POST', headers: { 'content-type': 'text/plain' }, body: '{}' })
    expect(text.status).to.equal(415)
    await addUser(beacon.url, a.account, 'gus@example.com', 'viewer')
    expect((await signIn(beacon.url, 'gus@example.com')).status).to.equal(200)
  })

  it('answers the same 401 invalid_credentials for an unknown email and a wrong password', async () => {
    await addUser(beacon.url, a.account, 'carla@example.com', 'viewer')
    const unknown = await signIn(beacon.url, 'nobody@example.com', PASSWORD, { 'x-test': '1' })
    const wrong = await signIn(beacon.url, 'carla@example.com', 'wrong password!')
    expect(unknown.status).to.equal(401)
    expect(wrong.status).to.equal(401)
    expect(unknown.body).to.deep.equal(wrong.body)
    expectError(wrong, 'invalid_credentials')
  })

  it('limits failed sign-ins per email: past the limit even the right password gets 429 with Retry-After', async () => {
    await addUser(beacon.url, a.account, 'dora@example.com', 'viewer')
    for (let i = 0; i < SIGN_IN_LIMITS.perEmail; i++) expect((await signIn(beacon.url, 'dora@example.com', 'wrong password!')).status).to.equal(401)
    const limited = await signIn(beacon.url, 'dora@example.com')
    expectError(limited, 'rate_limited')
    const retry = Number(limited.headers.get('retry-after'))
    expect(retry).to.be.greaterThan(0).and.at.most(SIGN_IN_LIMITS.windowMs / 1000)
    // Another user signs in meanwhile (from the same address: under its own limit).
    await addUser(beacon.url, a.account, 'emil@example.com', 'viewer')
    expect((await signIn(beacon.url, 'emil@example.com')).status).to.equal(200)
  })

  it('keeps sessions across a restart (stored hashed in LMDB)', async () => {
    await addUser(beacon.url, a.account, 'fay@example.com', 'editor')
    const { cookie } = (await signIn(beacon.url, 'fay@example.com')).signedIn!
    expect(await beacon.stop()).to.equal(0)
    const again = await startBeacon({ dataDir: beacon.dataDir })
    beacon = again
    const me = await asUser(again.url, cookie, 'GET', '/admin/session')
    expect(me.status).to.equal(200)
    expect(me.body.user.email).to.equal('fay@example.com')
  })
  it('limits failed sign-ins per address, across emails (run last: it locks this address out)', async () => {
    let attempts = 0
    let status = 401
    while (status === 401 && attempts <= SIGN_IN_LIMITS.perAddress) {
      status = (await signIn(beacon.url, `guess${attempts}@example.com`, 'wrong password!')).status
      attempts++
    }
    expect(status).to.equal(429)
    const limited = await signIn(beacon.url, 'fresh@example.com', 'wrong password!')
    expect(limited.status).to.equal(429)
    expect(limited.headers.get('retry-after')).to.match(/^\d+$/)
  })
})
