// The takeover through NATS of issue 26, tried as an attacker would, on a real cluster (a 3-server NATS
// JetStream cluster R3, 2 Beacon processes: test/helpers/beacon-cluster.ts): with a raw NATS connection
// alone (no Beacon key), write a panel session entry, a panel user record and an API token record into
// Beacon's buckets, then use them through Beacon's HTTP API. Each is refused (401), and every node logs
// one warning naming the bucket and key. Before entries were signed each of these worked: the forged
// session read the owner's account, the forged user signed in, the forged token wrote a visitor.
// Also: a node started with another BEACON_SECRETS_KEY than the cluster's refuses to start with one line
// naming it.

import { expect } from 'chai'
import { createHash, randomBytes, randomUUID } from 'node:crypto'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { Kvm } from '@nats-io/kv'
import { Packr } from 'msgpackr'
import { post, removeDir, startBeacon, tempDir, visitorId } from '../helpers/beacon.js'
import { startBeaconCluster, type BeaconCluster, type ClusterMember } from '../helpers/beacon-cluster.js'
import { addUser, asUser, signIn } from '../helpers/panel.js'
import { until } from '../helpers/until.js'
import { hashPassword } from '../../src/users/password.js'
import { hashSecret } from '../../src/auth/tokens.js'

/** As Beacon writes records: plain msgpack maps. */
const packr = new Packr({ useRecords: false })

/** How long a node may take to hear of a write to a bucket it watches. */
const HEARD_MS = 5_000

describe('Beacon cluster mode: entries forged through NATS are refused (real processes)', function () {
  this.timeout(120_000)
  let cluster: BeaconCluster
  let nc: NatsConnection
  let node: ClusterMember[]

  before(async () => {
    cluster = await startBeaconCluster(2)
    await cluster.settled()
    node = cluster.members
    // The attacker: a plain NATS client, as anyone reaching an open NATS server.
    nc = await connect({ servers: cluster.nats.urls })
  })
  after(async () => {
    await nc?.close()
    await cluster?.close()
  })

  const account = (): string => cluster.tenant.account

  /** Writes `value` under `key` of a Beacon bucket, as any NATS client can. */
  async function forge (bucket: string, key: string, value: unknown): Promise<void> {
    const kv = await new Kvm(nc).open(bucket)
    await kv.put(key, packr.pack(value))
  }

  /** Every node logged the refusal of (bucket, key): one warning line each, no value in it. */
  function refusalLogged (member: ClusterMember, bucket: string, key: string): boolean {
    return member.process!.output().split('\n').some(line => line.includes('failed its signature check') && line.includes(`"bucket":"${bucket}"`) && line.includes(`"key":"${key}"`))
  }

  /**
   * Waits (up to HEARD_MS) for every node to log the refusal, then uses the entry through each node:
   * it must not work. (Where nothing refuses, as before signatures, the wait runs out and the use works.)
   */
  async function refusedEverywhere (bucket: string, key: string, used: (member: ClusterMember) => Promise<boolean>): Promise<void> {
    for (const member of node) {
      await until(`${member.id} to log the refusal of ${bucket} ${key}`, () => refusalLogged(member, bucket, key), HEARD_MS, 20).catch(() => {})
      expect(await used(member), `the forged entry was used through ${member.id}`).to.equal(false)
      const lines = member.process!.output().split('\n').filter(line => line.includes(`"key":"${key}"`))
      expect(lines, `${member.id} logs one warning line naming the bucket and key`).to.have.length(1)
      expect(lines[0]).to.include('"level":40').and.to.include('failed its signature check').and.to.include(`"bucket":"${bucket}"`)
    }
  }

  it('warns at start, once per NATS connection, that the server let it in without authentication (the harness runs NATS open)', () => {
    for (const member of node) {
      const warnings = member.process!.output().split('\n').filter(line => line.includes('accepted this connection without authentication'))
      expect(warnings.map(line => JSON.parse(line).connection).sort(), member.id).to.deep.equal(['beacon', 'beacon-cluster'])
      expect(warnings.every(line => line.includes('"level":40'))).to.equal(true)
    }
  })

  it('refuses a panel session written into the sessions bucket: the forged cookie does not act as the account\'s owner', async () => {
    const owner = await addUser(node[0]!.url, account(), `owner-${randomUUID()}@example.com`, 'owner')
    const id = randomBytes(32).toString('base64url')
    const key = createHash('sha256').update(id).digest('hex')
    const nowMs = Date.now()
    const bucket = `BEACON_SESSIONS_${cluster.name}`
    await forge(bucket, key, { userId: owner.id, createdAtMs: nowMs, expiresAtMs: nowMs + 3_600_000 })
    const cookie = `beacon_session=${id}`
    await refusedEverywhere(bucket, key, async member => (await asUser(member.url, cookie, 'GET', `/admin/accounts/${account()}/users`)).status === 200)
    // A session made by signing in still works on every node.
    const email = `real-${randomUUID()}@example.com`
    await addUser(node[0]!.url, account(), email, 'owner')
    const real = await signIn(node[1]!.url, email)
    expect(real.status).to.equal(200)
    for (const member of node) await until(`the real session on ${member.id}`, async () => (await asUser(member.url, real.signedIn!.cookie, 'GET', '/admin/session')).status === 200, HEARD_MS)
  })

  it('refuses a panel user written into the configuration bucket: it cannot sign in', async () => {
    const id = randomUUID()
    const email = `intruder-${id}@example.com`
    const password = 'the attacker knows this one'
    const bucket = `BEACON_CONFIG_${cluster.name}`
    const key = `users.${id.replace(/[^A-Za-z0-9_-]/g, c => `=${c.charCodeAt(0).toString(16).toUpperCase()}`)}`
    await forge(bucket, key, { id, account: account(), email, name: 'Intruder', role: 'owner', passwordHash: await hashPassword(password), createdAt: new Date().toISOString() })
    await refusedEverywhere(bucket, key, async member => (await signIn(member.url, email, password)).status === 200)
  })

  it('refuses an API token written into the configuration bucket: it cannot write a visitor', async () => {
    const id = randomBytes(8).toString('hex')
    const secret = randomBytes(32).toString('base64url')
    const bucket = `BEACON_CONFIG_${cluster.name}`
    const key = `tokens.${id}`
    await forge(bucket, key, { id, account: account(), name: 'forged', attributes: ['*'], access: 'read-write', ratePerSecond: null, hash: hashSecret(secret), createdAt: new Date().toISOString(), revokedAt: null })
    const token = `bk_${id}_${secret}`
    await refusedEverywhere(bucket, key, async member => (await post(member.url, '/visitors/attributes', { account: account(), token, visitorId: visitorId(), attributes: { owned: 'yes' } })).status === 200)
    // The tenant's real token still writes.
    expect((await post(node[0]!.url, '/visitors/attributes', { account: account(), token: cluster.tenant.token, visitorId: visitorId(), attributes: { color: 'red' } })).status).to.equal(200)
  })

  it('refuses to start a node whose BEACON_SECRETS_KEY is not the cluster\'s, with one line naming it', async () => {
    // A fresh folder: nothing in it sealed yet, so only the cluster can tell (before, such a node joined
    // and failed at its first restart, on the secrets it had stored meanwhile).
    const dataDir = tempDir()
    try {
      const started = await startBeacon({ dataDir, env: cluster.env('node-9', { BEACON_SECRETS_KEY: randomBytes(32).toString('base64') }) })
      await started.kill()
      expect.fail('a node with another BEACON_SECRETS_KEY started')
    } catch (error) {
      const message = (error as Error).message
      expect(message).to.include(`beacon: failed to start: BEACON_SECRETS_KEY of this node is not the cluster ${cluster.name}'s (every node must have the same`)
      expect(message.split('\n').filter(line => line.startsWith('beacon: '))).to.have.length(1)
    } finally {
      removeDir(dataDir)
    }
  })

  it('refuses to start a cluster node without BEACON_SECRETS_KEY, with one line naming it', async () => {
    const dataDir = tempDir()
    try {
      const { BEACON_SECRETS_KEY: _key, ...withoutKey } = cluster.env('node-9')
      const started = await startBeacon({ dataDir, env: { ...withoutKey, BEACON_SECRETS_KEY: '' } })
      await started.kill()
      expect.fail('a node without BEACON_SECRETS_KEY started')
    } catch (error) {
      expect((error as Error).message).to.include('BEACON_CLUSTER: cluster mode needs BEACON_SECRETS_KEY (the same on every node')
    } finally {
      removeDir(dataDir)
    }
  })

  it('lets a node listing the cluster\'s key second start (a rotation), and from then on refuses a node that has the old key only', async () => {
    const env = cluster.env('node-8')
    const old = env.BEACON_SECRETS_KEY!
    const next = randomBytes(32).toString('base64')
    const dirs = [await cluster.seededDir(), await cluster.seededDir()]
    try {
      const rotated = await startBeacon({ dataDir: dirs[0]!, env: { ...env, BEACON_SECRETS_KEY: `${next},${old}` } })
      await rotated.stop()
      const error = await startBeacon({ dataDir: dirs[1]!, env: cluster.env('node-7') }).then(async started => { await started.kill(); return null }, (e: Error) => e)
      expect(error?.message).to.include('BEACON_SECRETS_KEY of this node is not the cluster')
    } finally {
      for (const dir of dirs) removeDir(dir)
    }
  })
})
