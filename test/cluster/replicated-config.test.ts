// Cluster mode's configuration (src/catalog/replicated-config.ts) on a real 3-server NATS cluster (R3)
// with three in-process Catalogs, each on its own temp LMDB folder and its own NATS server: a change
// through one node is in effect on the others (measured), limits hold across nodes, secrets stay
// sealed in the bucket, deletes propagate, and a node started late or restarted after changes gets
// the whole configuration before it is ready.

import { expect } from 'chai'
import { randomBytes } from 'node:crypto'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { Kvm } from '@nats-io/kv'
import { Catalogs } from '../../src/catalog/catalogs.js'
import { EntrySigner } from '../../src/cluster/entry-signer.js'
import { startReplicatedConfig, type ReplicatedConfig } from '../../src/catalog/replicated-config.js'
import type { SegmentsChanged } from '../../src/catalog/segments.js'
import { parseToken, secretMatches } from '../../src/auth/tokens.js'
import { systemClock } from '../../src/clock.js'
import { ApiError } from '../../src/errors.js'
import { Listeners } from '../../src/listeners.js'
import { log } from '../../src/log.js'
import type { CampaignDef, MatchContext } from '../../src/matching/index.js'
import { Store } from '../../src/store/store.js'
import { Sessions } from '../../src/users/sessions.js'
import { Users } from '../../src/users/users.js'
import { WEBHOOKS_MAX } from '../../src/store/limits.js'
import type { WebhookChanged } from '../../src/webhooks/lookup.js'
import { removeDir, tempDir } from '../helpers/beacon.js'
import { startNatsCluster, type NatsCluster } from '../helpers/nats-cluster.js'
import { until } from '../helpers/until.js'

if (process.env.BEACON_LOG_LEVEL === undefined) log.level = 'warn'

const CLUSTER = 'cfgtest'
/** Every node of a cluster has the same BEACON_SECRETS_KEY. */
const SECRETS_KEY = randomBytes(32).toString('base64')

interface Node {
  dir: string
  store: Store
  catalogs: Catalogs
  replicated: ReplicatedConfig
  nc: NatsConnection
  segmentVersions: Array<{ account: string, version: number }>
  webhookChanges: string[]
  stop (): Promise<void>
}

const campaign = (name: string, event: string): CampaignDef => ({ name, status: 'active', priority: 1, trigger: { events: [event] }, content: { say: name } })

const context = (event: string): MatchContext => ({
  event: { event, platform: 'web' }, attributes: {}, segments: new Set(), nowMs: Date.now(),
  visitor: { pageViews: 0, productViews: 0, purchases: 0, totalSpent: 0, firstSeenMs: 0, lastSeenMs: 0 },
} as unknown as MatchContext)

/** The ids of the campaigns node `node` matches for `event` on `account`. */
function matched (node: Node, account: string, event: string): string[] {
  return node.catalogs.campaigns.compiledSet(account)?.match(context(event)).map(c => c.id) ?? []
}

function codeOf (error: unknown): string {
  return error instanceof ApiError ? error.items[0]!.code : String(error)
}

describe('cluster configuration: catalogs replicated through a KV bucket', function () {
  this.timeout(120_000)
  let cluster: NatsCluster
  const nodes: Node[] = []

  async function startNode (server: number, dir = tempDir('beacon-config-'), clusterName = CLUSTER): Promise<Node> {
    const store = new Store({ path: dir, durability: 'committed', secretsKey: SECRETS_KEY })
    const segmentsChanged = new Listeners<SegmentsChanged>()
    const webhookChanged = new Listeners<WebhookChanged>()
    const catalogs = new Catalogs({ store, clock: systemClock, segmentsChanged, webhookChanged, allowPrivateWebhooks: true })
    const segmentVersions: Node['segmentVersions'] = []
    const webhookChanges: string[] = []
    segmentsChanged.add((account, version) => segmentVersions.push({ account, version }))
    webhookChanged.add((account, id, webhook) => webhookChanges.push(`${webhook === null ? 'gone' : 'set'} ${id}`))
    const urls = [cluster.urls[server]!, ...cluster.urls.filter((_, i) => i !== server)]
    const nc = await connect({ servers: urls, noRandomize: true, reconnectTimeWait: 100, maxReconnectAttempts: -1 })
    const users = new Users(store, systemClock, new Sessions(store, systemClock, 60_000))
    const replicated = await startReplicatedConfig({ nc, cluster: clusterName, replicas: 3, store, catalogs, users, signer: new EntrySigner(store.secrets.rawKeys) })
    const node: Node = {
      dir, store, catalogs, replicated, nc, segmentVersions, webhookChanges,
      async stop () {
        replicated.close()
        await nc.close()
        await store.close()
      },
    }
    nodes.push(node)
    return node
  }

  async function stopNode (node: Node): Promise<void> {
    nodes.splice(nodes.indexOf(node), 1)
    await node.stop()
  }

  let n1: Node, n2: Node, n3: Node
  let account: string

  before(async () => {
    cluster = await startNatsCluster()
    n1 = await startNode(0)
    n2 = await startNode(1)
    n3 = await startNode(2)
    await Promise.all([n1, n2, n3].map(node => node.replicated.ready))
    account = (await n1.catalogs.accounts.create('acme')).account.account
    await until('the account on every node', () => n2.catalogs.accounts.knows(account) && n3.catalogs.accounts.knows(account), 1000, 1)
  })
  after(async () => {
    for (const node of [...nodes]) await node.stop().catch(() => {})
    for (const node of nodes) removeDir(node.dir)
    await cluster?.close()
  })

  // "Within about 1 s" is the median's bound (typically 10 ms); each campaign must arrive by the watch
  // alone (no later write to push it along) within 5 s, a margin for a loaded machine whose two test
  // workers stall this process now and then (one such stall of over 1 s failed a whole suite).
  it('matches a campaign created through node 1 on node 3 within about 1 s (lag measured)', async () => {
    const lags: number[] = []
    const acks: number[] = []
    for (let i = 0; i < 20; i++) {
      const event = `visit${i}`
      const started = performance.now()
      await n1.catalogs.campaigns.put(account, `c${i}`, campaign(`campaign ${i}`, event))
      acks.push(performance.now() - started)
      // Compiled and in effect on the writer when the write is answered.
      expect(matched(n1, account, event)).to.include(`c${i}`)
      await until(`campaign c${i} matched on node 3`, () => matched(n3, account, event).includes(`c${i}`), 5000, 1)
      lags.push(performance.now() - started)
    }
    const sorted = (values: number[]): number[] => [...values].sort((a, b) => a - b)
    const [a, l] = [sorted(acks), sorted(lags)]
    console.log(`      write answered on node 1: median ${a[10]!.toFixed(1)} ms, slowest ${a[19]!.toFixed(1)} ms; ` +
      `matched on node 3 after: median ${l[10]!.toFixed(1)} ms, slowest ${l[19]!.toFixed(1)} ms (from the write's start, 20 campaigns)`)
    expect(l[10], 'the median lag (ms)').to.be.below(1000)
    expect(matched(n2, account, 'visit7')).to.deep.equal(['c7'])
  })

  it('accepts on node 2 a token created on node 1, and refuses it everywhere once revoked on node 3', async () => {
    const { token, record } = await n1.catalogs.tokens.create(account, { name: 'server', attributes: ['*'], access: 'read-write' })
    const { id, secret } = parseToken(token)!
    await until('the token on node 2', () => n2.catalogs.tokens.get(id) !== undefined, 1000, 1)
    const live = n2.catalogs.tokens.get(id)!
    expect(live.record.account).to.equal(account)
    expect(secretMatches(secret, live.record.hash)).to.equal(true)
    expect(live.record.id).to.equal(record.id)
    const revoked = await n3.catalogs.tokens.revoke(account, id)
    expect(revoked.revokedAt).to.be.a('string')
    await until('the revocation on node 1 and 2', () => n1.catalogs.tokens.get(id)?.record.revokedAt !== null && n2.catalogs.tokens.get(id)?.record.revokedAt !== null, 1000, 1)
  })

  it('puts account settings and identity secrets changed through node 2 in effect on nodes 1 and 3', async () => {
    const other = (await n2.catalogs.accounts.create('settings')).account.account
    await n2.catalogs.accounts.update(other, { suspended: true, allowedOrigins: ['https://shop.example'] })
    await until('the suspension on nodes 1 and 3', () => n1.catalogs.accounts.knows(other) && n1.catalogs.accounts.active(other) === undefined && n3.catalogs.accounts.active(other) === undefined, 1000, 1)
    expect(n3.catalogs.accounts.get(other).allowedOrigins).to.deep.equal(['https://shop.example'])
    const { account } = await n2.catalogs.accounts.rotateIdentitySecret(other, 0)
    await until('the new identity secret on node 1', () => n1.catalogs.accounts.get(other).identitySecretSince === account.identitySecretSince, 1000, 1)
  })

  it('propagates deletes, segment versions and webhooks, their secrets sealed in the bucket', async () => {
    await n2.catalogs.campaigns.delete(account, 'c3')
    expect(matched(n2, account, 'visit3')).to.deep.equal([])
    await until('c3 gone on nodes 1 and 3', () => matched(n1, account, 'visit3').length === 0 && matched(n3, account, 'visit3').length === 0, 1000, 1)

    // A segment: the same segments version on every node, each told once.
    const before = n3.segmentVersions.length
    await n1.catalogs.segments.put(account, 'vip', { description: 'browsers', rule: { fact: 'count', event: 'productView', within: '7d', op: 'gte', value: 3 } })
    await until('the segment on node 3', () => n3.segmentVersions.length === before + 1, 1000, 1)
    const version = n1.segmentVersions[n1.segmentVersions.length - 1]!.version
    expect(n3.segmentVersions[n3.segmentVersions.length - 1]).to.deep.equal({ account, version })
    expect(n3.catalogs.segments.get(account, 'vip')).to.deep.equal(n1.catalogs.segments.get(account, 'vip'))
    expect(n3.catalogs.segments.compiledSet(account).version).to.equal(version)

    const secret = 'whsec_' + randomBytes(32).toString('base64')
    const token = 'tok_' + randomBytes(16).toString('hex')
    await n2.catalogs.webhooks.put(account, 'orders', {
      name: 'orders', enabled: true, trigger: { kind: 'event', events: ['purchase'] },
      request: { method: 'POST', url: 'http://127.0.0.1:9/in', signingSecret: secret, auth: { type: 'bearer', token } },
      delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1 },
    })
    await until('the webhook on node 3', () => n3.webhookChanges.includes('set orders'), 1000, 1)
    expect(n3.catalogs.webhooks.wantsEvent(account, 'purchase')).to.equal(true)
    expect(n3.catalogs.webhooks.webhook(account, 'orders').config.request.signingSecret).to.equal(secret)
    const kv = await new Kvm(n1.nc).open(`BEACON_CONFIG_${CLUSTER}`)
    const stored = await kv.get(`webhooks.${account}=2Forders`)
    expect(stored?.value.length).to.be.above(0)
    const bytes = Buffer.from(stored!.value).toString('latin1')
    expect(bytes).not.to.include(secret)
    expect(bytes).not.to.include(token)

    await n3.catalogs.webhooks.delete(account, 'orders')
    await until('the webhook gone on node 1', () => n1.webhookChanges.includes('gone orders'), 1000, 1)
    expect(n1.catalogs.webhooks.wantsEvent(account, 'purchase')).to.equal(false)
  })

  it(`never lets concurrent creations through two nodes pass the limit (${WEBHOOKS_MAX} webhooks)`, async () => {
    const other = (await n3.catalogs.accounts.create('limits')).account.account
    await until('the account on nodes 1 and 2', () => n1.catalogs.accounts.knows(other) && n2.catalogs.accounts.knows(other), 1000, 1)
    const body = (i: number): unknown => ({
      name: `hook ${i}`, enabled: true, trigger: { kind: 'event', events: ['purchase'] },
      request: { method: 'POST', url: 'http://127.0.0.1:9/in' }, delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1 },
    })
    const started = performance.now()
    const put = (i: number): Promise<unknown> => (i % 2 === 0 ? n1 : n2).catalogs.webhooks.put(other, `w${i}`, body(i))
    const outcomes = new Map<number, string>()
    // A creation that could not take the account's lock in time (503 config_unavailable, as on a loaded
    // machine) was not made: sent again, as a client told to retry would, until each is made or refused.
    let pending = Array.from({ length: 130 }, (_, i) => i)
    for (let round = 0; pending.length > 0 && round < 20; round++) {
      const results = await Promise.allSettled(pending.map(put))
      results.forEach((result, k) => outcomes.set(pending[k]!, result.status === 'fulfilled' ? 'made' : codeOf(result.reason)))
      pending = pending.filter(i => outcomes.get(i) === 'config_unavailable')
    }
    const ms = performance.now() - started
    const counts = [...outcomes.values()].reduce<Record<string, number>>((all, outcome) => ({ ...all, [outcome]: (all[outcome] ?? 0) + 1 }), {})
    console.log(`      130 concurrent creations through two nodes: ${JSON.stringify(counts)} in ${ms.toFixed(0)} ms`)
    expect(counts).to.deep.equal({ made: WEBHOOKS_MAX, conflict: 130 - WEBHOOKS_MAX })
    for (const node of [n1, n2, n3]) {
      await until('every webhook applied', () => [...node.catalogs.webhooks.webhooksOf(other)].length === WEBHOOKS_MAX, 1000, 1)
    }
  })

  it('gives a node started late the whole configuration before it is ready', async () => {
    const late = await startNode(1)
    await late.replicated.ready
    expect(late.catalogs.accounts.knows(account)).to.equal(true)
    expect(matched(late, account, 'visit5')).to.deep.equal(['c5'])
    expect(matched(late, account, 'visit3')).to.deep.equal([])
    expect(late.catalogs.segments.compiledSet(account).version).to.equal(n1.catalogs.segments.compiledSet(account).version)
    expect(late.catalogs.tokens.list(account, { cursor: '', limit: 10 }).items).to.have.length(1)
    await stopNode(late)
    removeDir(late.dir)
  })

  it('brings a restarted node up to date: changes made while it was away, deletes included', async () => {
    const dir = n3.dir
    await stopNode(n3)
    await n1.catalogs.campaigns.delete(account, 'c5')
    await n1.catalogs.campaigns.put(account, 'while-away', campaign('while away', 'away'))
    const gone = (await n1.catalogs.accounts.create('short-lived')).account.account
    await n2.catalogs.campaigns.put(gone, 'x', campaign('x', 'x'))
    n3 = await startNode(2, dir)
    // Loaded from its own store at start: the campaign deleted meanwhile is still there until the watch caught up.
    await n3.replicated.ready
    expect(matched(n3, account, 'visit5')).to.deep.equal([])
    expect(matched(n3, account, 'away')).to.deep.equal(['while-away'])
    expect(matched(n3, gone, 'x')).to.deep.equal(['x'])
  })

  it('propagates an account deletion, and removes its records from the bucket', async () => {
    const doomed = (await n2.catalogs.accounts.create('doomed')).account.account
    await n2.catalogs.campaigns.put(doomed, 'promo', campaign('promo', 'buy'))
    await n2.catalogs.tokens.create(doomed, { name: 't', attributes: ['*'], access: 'read-write' })
    await until('the campaign on node 3', () => matched(n3, doomed, 'buy').length === 1, 1000, 1)
    const started = performance.now()
    await n1.catalogs.forgetAccount(doomed, ['account-deletion', doomed], { test: true })
    const answeredMs = performance.now() - started
    expect(matched(n1, doomed, 'buy')).to.deep.equal([])
    await until('the account gone on nodes 2 and 3', () => !n2.catalogs.accounts.knows(doomed) && !n3.catalogs.accounts.knows(doomed), 1000, 1)
    console.log(`      account deletion answered on node 1 after ${answeredMs.toFixed(1)} ms, gone from nodes 2 and 3 after ${(performance.now() - started).toFixed(1)} ms`)
    expect(matched(n3, doomed, 'buy')).to.deep.equal([])
    const kv = await new Kvm(n1.nc).open(`BEACON_CONFIG_${CLUSTER}`)
    const left = async (): Promise<string[]> => {
      const keys: string[] = []
      for await (const key of await kv.keys()) if (key.includes(doomed)) keys.push(key)
      return keys
    }
    // Background clean-up (no time is promised for it): bounded generously for a busy machine.
    await until('the account\'s records gone from the bucket', async () => (await left()).length === 0, 30_000, 20)
    await until('its rows gone from node 3\'s store', () => [...n3.store.config.getKeys({ start: [doomed], end: [doomed, '\uffff'] })].length === 0, 30_000, 5)
  })

  it('puts the first node\'s configuration into a new cluster\'s empty bucket (an embedded data folder becomes the cluster\'s)', async () => {
    /** A data folder of embedded mode with one account and one campaign. */
    const embeddedFolder = async (event: string): Promise<{ dir: string, account: string }> => {
      const dir = tempDir('beacon-config-')
      const store = new Store({ path: dir, durability: 'committed', secretsKey: SECRETS_KEY })
      const embedded = new Catalogs({ store, clock: systemClock, segmentsChanged: new Listeners(), webhookChanged: new Listeners(), allowPrivateWebhooks: true })
      const account = (await embedded.accounts.create('embedded')).account.account
      await embedded.campaigns.put(account, 'hello', campaign('hello', event))
      // A row of the node's own in the config db (a schedule's last run): never configuration.
      await store.save(store.config, [account, 'schedule-run', 'hook'], { lastRunMs: 1 })
      await store.close()
      return { dir, account }
    }
    const { dir, account: own } = await embeddedFolder('hi')
    const theirs = await embeddedFolder('yo')
    const first = await startNode(0, dir, 'seeded')
    await first.replicated.ready
    expect(matched(first, own, 'hi')).to.deep.equal(['hello'])
    expect(first.store.config.get([own, 'schedule-run', 'hook'])).to.deep.equal({ lastRunMs: 1 })
    // A later node with a configuration of its own does not add it: its rows give way to the cluster's.
    const second = await startNode(2, theirs.dir, 'seeded')
    await second.replicated.ready
    expect(matched(second, own, 'hi')).to.deep.equal(['hello'])
    expect(second.catalogs.accounts.knows(theirs.account)).to.equal(false)
    const kv = await new Kvm(first.nc).open('BEACON_CONFIG_seeded')
    const keys: string[] = []
    for await (const key of await kv.keys()) keys.push(key)
    expect(keys.sort()).to.deep.equal([`accounts.${own}`, `campaigns.${own}=2Fhello`])
    await until('its own configuration gone from its store', () => second.store.accounts.get(theirs.account) === undefined && second.store.config.get([theirs.account, 'campaign', 'hello']) === undefined, 5000, 5)
    await stopNode(second)
    removeDir(second.dir)
    await stopNode(first)
    removeDir(first.dir)
  })

  it('answers 503 config_unavailable when NATS has no quorum, and takes changes again once it has', async () => {
    await cluster.servers[1]!.kill()
    await cluster.servers[2]!.kill()
    const started = performance.now()
    let code = 'none'
    try {
      await n1.catalogs.campaigns.put(account, 'no-quorum', campaign('no quorum', 'nq'))
    } catch (error) {
      code = codeOf(error)
    }
    console.log(`      without a quorum: ${code} after ${(performance.now() - started).toFixed(0)} ms`)
    expect(code).to.equal('config_unavailable')
    expect(matched(n1, account, 'nq')).to.deep.equal([])
    await cluster.servers[1]!.restart()
    await cluster.servers[2]!.restart()
    await cluster.waitForQuorum()
    const back = performance.now()
    for (;;) {
      try {
        await n1.catalogs.campaigns.put(account, 'no-quorum', campaign('no quorum', 'nq'))
        break
      } catch (error) {
        expect(codeOf(error)).to.equal('config_unavailable')
        if (performance.now() - back > 60_000) throw error
      }
    }
    console.log(`      quorum back: the change taken ${(performance.now() - back).toFixed(0)} ms later`)
    await until('the campaign on node 3', () => matched(n3, account, 'nq').length === 1, 30_000, 5)
  })
})
