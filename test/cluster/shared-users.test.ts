// Panel users and sessions shared by every node, real processes: a 3-server NATS JetStream cluster (R3)
// and 3 Beacon nodes (test/helpers/beacon-cluster.ts). A user created through one node signs in through
// another; the cookie works through the third, on a request it answers itself and on one it forwards to
// the visitor's owner (which checks the session again); a sign-out through one node ends the session on
// every node, a user removed through one node has its sessions refused on every node, each within 1 s
// (until() bounds, times printed, never asserted); a duplicate user created concurrently through two
// nodes is created once (201 and 409); a password change ends the user's sessions everywhere; a
// session expires on every node; an account's deletion ends its users' sessions everywhere and frees
// their emails; failed sign-ins through every node count toward one limit; with NATS without a quorum
// a sign-in is 503 with Retry-After.

import { expect } from 'chai'
import { admin, post, visitorId, type Answer } from '../helpers/beacon.js'
import { ownersOf, startBeaconCluster, CLUSTER_PARTITIONS, type BeaconCluster, type ClusterMember } from '../helpers/beacon-cluster.js'
import { addUser, asUser, signIn } from '../helpers/panel.js'
import { until } from '../helpers/until.js'
import { partitionOf } from '../../src/cluster/partition.js'

/** How long a change through one node may take to be in effect on the others. */
const IN_EFFECT_MS = 1_000
/** Sessions last this long here: each flow below ends well within it; the expiry is awaited once. */
const SESSION_TTL_MS = 6_000

describe('Beacon cluster mode: panel users and sessions shared by every node (3 nodes, real processes)', function () {
  this.timeout(120_000)
  let cluster: BeaconCluster
  let node: ClusterMember[]

  before(async () => {
    cluster = await startBeaconCluster(3, { BEACON_SESSION_TTL_MS: String(SESSION_TTL_MS) })
    await cluster.settled()
    node = cluster.members
  })
  after(async () => {
    await cluster?.close()
  })

  const account = (): string => cluster.tenant.account
  const usersPath = (inAccount = account()): string => `/admin/accounts/${inAccount}/users`

  /** Polls `check` through every node in `through` until it holds everywhere; prints how long it took. */
  async function everywhere (what: string, through: ClusterMember[], check: (member: ClusterMember) => Promise<boolean>): Promise<void> {
    const startedMs = Date.now()
    for (const member of through) await until(`${what} on ${member.id}`, () => check(member), IN_EFFECT_MS)
    console.log(`      ${what}: on ${through.map(member => member.id).join(', ')} after ${Date.now() - startedMs} ms`)
  }

  const listed = async (member: ClusterMember, email: string, inAccount = account()): Promise<boolean> => {
    const res = await admin(member.url, 'GET', usersPath(inAccount))
    return res.status === 200 && (res.body.users as Array<{ email: string }>).some(user => user.email === email)
  }
  const session = (member: ClusterMember, cookie: string): Promise<Answer> => asUser(member.url, cookie, 'GET', '/admin/session')

  /** A visitor that exists, whose partition `member` does not own (a read of it through `member` is forwarded). */
  async function visitorOwnedElsewhere (member: ClusterMember): Promise<string> {
    const owners = ownersOf(await cluster.status(member))
    for (;;) {
      const id = visitorId()
      const owner = owners.get(partitionOf(account(), id, CLUSTER_PARTITIONS))
      if (owner === undefined || owner === member.id) continue
      const res = await post(member.url, '/campaigns/query', { account: account(), visitorId: id, platform: 'web', event: 'productView', sku: 'sku-1' })
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
      return id
    }
  }

  /**
   * A user created through `created`, listed through `signedIn` within 1 s, signed in there; the cookie
   * accepted through `accepted` within 1 s.
   */
  async function newSession (email: string, role: string, created: ClusterMember, signedIn: ClusterMember, accepted: ClusterMember[], inAccount = account()): Promise<{ id: string, cookie: string }> {
    const { id } = await addUser(created.url, inAccount, email, role)
    await everywhere('the new user listed', [signedIn], member => listed(member, email, inAccount))
    const answer = await signIn(signedIn.url, email)
    expect(answer.status, JSON.stringify(answer.body)).to.equal(200)
    const cookie = answer.signedIn!.cookie
    await everywhere('the session accepted', accepted, async member => (await session(member, cookie)).status === 200)
    return { id, cookie }
  }

  it('a user created through node 1 signs in through node 2; the cookie works through node 3, forwarded or not; sign-out through node 3 ends it everywhere', async () => {
    const { cookie } = await newSession('owner-1@example.com', 'owner', node[0]!, node[1]!, [node[2]!, node[0]!])
    // Not forwarded: node 3 answers the account's users itself.
    const list = await asUser(node[2]!.url, cookie, 'GET', usersPath())
    expect(list.status, JSON.stringify(list.body)).to.equal(200)
    // Forwarded: a visitor of a partition node 3 does not own; its owner checks the session too.
    const visitor = await visitorOwnedElsewhere(node[2]!)
    const read = await asUser(node[2]!.url, cookie, 'GET', `/admin/accounts/${account()}/visitors/${visitor}`)
    expect(read.status, JSON.stringify(read.body)).to.equal(200)
    // A change with the session through node 3 (forwarded too): the Origin check holds at the owner.
    const erase = await asUser(node[2]!.url, cookie, 'DELETE', `/admin/accounts/${account()}/visitors/${visitor}`)
    expect(erase.status, JSON.stringify(erase.body)).to.be.oneOf([200, 202, 204])

    const out = await asUser(node[2]!.url, cookie, 'DELETE', '/admin/session')
    expect(out.status).to.equal(204)
    expect((await session(node[2]!, cookie)).status, 'at once through the node that signed out').to.equal(401)
    await everywhere('the signed-out session refused', [node[0]!, node[1]!], async member => (await session(member, cookie)).status === 401)
    const forwarded = await asUser(node[0]!.url, cookie, 'GET', `/admin/accounts/${account()}/visitors/${await visitorOwnedElsewhere(node[0]!)}`)
    expect(forwarded.status, 'a forwarded request with the ended session').to.equal(401)
  })

  it('a user removed through node 2 has its sessions refused through every node', async () => {
    const email = 'editor-1@example.com'
    const { id, cookie } = await newSession(email, 'editor', node[2]!, node[0]!, node)

    const removed = await admin(node[1]!.url, 'DELETE', `${usersPath()}/${id}`)
    expect(removed.status, JSON.stringify(removed.body)).to.equal(204)
    expect((await session(node[1]!, cookie)).status, 'at once through the node that removed it').to.equal(401)
    await everywhere('the removed user\'s session refused', [node[0]!, node[2]!], async member => (await session(member, cookie)).status === 401)
    for (const member of node) expect(await listed(member, email), `${member.id} lists no removed user`).to.equal(false)
    const again = await signIn(node[2]!.url, email)
    expect(again.status, 'the removed user cannot sign in').to.equal(401)
  })

  it('a password changed through node 1 ends the user\'s sessions on every node', async () => {
    const email = 'editor-2@example.com'
    const { id, cookie } = await newSession(email, 'editor', node[1]!, node[2]!, node)
    const changed = await admin(node[0]!.url, 'PATCH', `${usersPath()}/${id}`, { password: 'another long enough password' })
    expect(changed.status, JSON.stringify(changed.body)).to.equal(200)
    await everywhere('the session refused after the password change', node, async member => (await session(member, cookie)).status === 401)
    expect((await signIn(node[1]!.url, email, 'another long enough password')).status, 'the new password through another node').to.equal(200)
  })

  it('a session expires on every node at the same time', async () => {
    const { cookie } = await newSession('viewer-1@example.com', 'viewer', node[0]!, node[2]!, node)
    await until('the session expired on node-1', async () => (await session(node[0]!, cookie)).status === 401, SESSION_TTL_MS + 5_000, 50)
    for (const member of node) expect((await session(member, cookie)).status, `${member.id}: expired`).to.equal(401)
  })

  it('an account deleted through node 2 ends its users\' sessions on every node and frees their emails', async () => {
    const created = await admin(node[0]!.url, 'POST', '/admin/accounts', { name: 'Leaving' })
    expect(created.status, JSON.stringify(created.body)).to.equal(201)
    const leaving = created.body.account as string
    await everywhere('the new account', [node[2]!], async member => (await admin(member.url, 'GET', `/admin/accounts/${leaving}`)).status === 200)
    const email = 'leaving-owner@example.com'
    const { cookie } = await newSession(email, 'owner', node[0]!, node[2]!, node, leaving)
    const deleted = await admin(node[1]!.url, 'DELETE', `/admin/accounts/${leaving}`)
    expect(deleted.status, JSON.stringify(deleted.body)).to.equal(202)
    await everywhere('the deleted account\'s session refused', node, async member => (await session(member, cookie)).status === 401)
    // Its users' records leave the cluster's configuration in the background: the email is free again.
    await until('the email free again', async () => (await admin(node[2]!.url, 'POST', usersPath(), { email, password: 'correct horse battery staple', role: 'viewer' })).status === 201, 5_000, 20)
  })

  it('a duplicate user created concurrently through two nodes is created once (201 and 409)', async () => {
    for (let round = 0; round < 3; round++) {
      const email = `twin-${round}@example.com`
      const [a, b] = await Promise.all([node[0]!, node[2]!].map(member => admin(member.url, 'POST', usersPath(), { email, password: 'correct horse battery staple', role: 'viewer' })))
      expect([a!.status, b!.status].sort(), `${JSON.stringify(a!.body)} ${JSON.stringify(b!.body)}`).to.deep.equal([201, 409])
      for (const member of node) {
        await until(`${email} listed on ${member.id}`, () => listed(member, email), IN_EFFECT_MS)
        const same = ((await admin(member.url, 'GET', usersPath())).body.users as Array<{ email: string }>).filter(user => user.email === email)
        expect(same.length, `${member.id}: one user with ${email}`).to.equal(1)
      }
    }
  })

  it('counts failed sign-ins through every node toward one limit per email', async () => {
    const email = 'guessed@example.com'
    await addUser(node[0]!.url, account(), email, 'viewer')
    await everywhere('the new user listed', node, member => listed(member, email))
    // Five wrong passwords, through the three nodes in turn (the limit is five per email).
    for (let i = 0; i < 5; i++) {
      const res = await signIn(node[i % 3]!.url, email, 'a wrong but long password')
      expect(res.status, JSON.stringify(res.body)).to.equal(401)
    }
    for (const member of node) {
      const res = await signIn(member.url, email)
      expect(res.status, `${member.id}: the right password, after five failures through all nodes`).to.equal(429)
      expect(Number(res.headers.get('retry-after'))).to.be.above(0)
    }
  })

  // issue 27: reserved before scrypt through the cluster's bucket (compare-and-set), settled after.
  it('tries at most the per-email limit of 60 wrong passwords and a right one sent at once through the three nodes', async () => {
    const email = 'burst@example.com'
    await addUser(node[0]!.url, account(), email, 'viewer')
    await everywhere('the new user listed', node, member => listed(member, email))
    const attempts = [...Array.from({ length: 60 }, () => 'a wrong but long password'), undefined]
    const statuses = (await Promise.all(attempts.map((password, i) => signIn(node[i % 3]!.url, email, password)))).map(answer => answer.status)
    const tried = statuses.filter(status => status === 401 || status === 200)
    expect(tried.length, JSON.stringify(statuses)).to.be.at.most(5).and.above(0)
    expect(statuses.every(status => status === 401 || status === 200 || status === 429), JSON.stringify(statuses)).to.equal(true)
  })

  it('answers a sign-in 503 with Retry-After while NATS has no quorum', async () => {
    const email = 'owner-1@example.com'
    await cluster.nats.servers[1]!.kill()
    await cluster.nats.servers[2]!.kill()
    const res = await signIn(node[0]!.url, email)
    expect(res.status, JSON.stringify(res.body)).to.equal(503)
    expect(res.body.errors[0].code).to.equal('unavailable')
    expect(res.headers.get('retry-after')).to.equal('1')
  })
})
