import { expect } from 'chai'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { Kvm, type KV } from '@nats-io/kv'
import { ConfigStore, configKey, type ConfigChange } from '../../src/cluster/config-kv.js'
import { ClusterError } from '../../src/cluster/errors.js'
import { EntrySigner } from '../../src/cluster/entry-signer.js'
import { retryWhileElecting } from '../../src/cluster/retry.js'
import { randomBytes } from 'node:crypto'
import { startNatsCluster, type NatsCluster } from '../helpers/nats-cluster.js'
import { until } from '../helpers/until.js'

const signer = new EntrySigner([randomBytes(32)])

const text = (value: Uint8Array | null): string | null => value === null ? null : Buffer.from(value).toString('utf8')

describe('cluster configuration records in a replicated KV bucket', function () {
  this.timeout(60_000)
  let cluster: NatsCluster
  const connections: NatsConnection[] = []
  const watches: Array<{ stop (): void }> = []

  /** A node: its own connection, to one server of the cluster first. */
  async function node (server: number, options: { bucket?: string, signer?: EntrySigner, resign?: boolean } = {}): Promise<ConfigStore> {
    const urls = [cluster.urls[server]!, ...cluster.urls.filter((_, i) => i !== server)]
    const nc = await connect({ servers: urls, noRandomize: true })
    connections.push(nc)
    return ConfigStore.open({ nc, bucket: options.bucket ?? 'BEACON_CONFIG_test', replicas: 3, signer: options.signer ?? signer, resign: options.resign })
  }

  /** Watches the bucket through `reader`; resolves with the changes seen so far once the watch is ready. */
  async function watchAll (reader: ConfigStore): Promise<ConfigChange[]> {
    const seen: ConfigChange[] = []
    let ready = false
    watches.push(await reader.watch({ onChange: change => seen.push(change), onReady: () => { ready = true } }))
    await until('the watch to be ready', () => ready, 20_000, 2)
    return seen
  }

  before(async () => { cluster = await startNatsCluster() })
  after(async () => {
    for (const watch of watches) watch.stop()
    for (const nc of connections) await nc.close()
    await cluster?.close()
  })

  it('delivers a change made through one node to a watcher on another, in order, deletes included', async () => {
    const writer = await node(0)
    const reader = await node(2)
    const seen = await watchAll(reader)

    const started = performance.now()
    await writer.put('campaigns', 'summer-sale', Buffer.from('{"v":1}'))
    await until('the campaign to reach the other node', () => seen.length === 1, 20_000, 1)
    const propagationMs = performance.now() - started
    console.log(`      config change seen on another node ${propagationMs.toFixed(1)} ms after the put was sent (R3)`)
    expect(seen[0]).to.deep.include({ kind: 'campaigns', id: 'summer-sale' })
    expect(text(seen[0]!.value)).to.equal('{"v":1}')

    const delays: number[] = [propagationMs]
    for (let i = 0; i < 50; i++) {
      const sent = performance.now()
      await writer.put('segments', `s${i % 5}`, Buffer.from(String(i)))
      await until(`change ${i}`, () => seen.length === 2 + i, 20_000, 1)
      delays.push(performance.now() - sent)
    }
    delays.sort((a, b) => a - b)
    console.log(`      over ${delays.length} changes: median ${delays[delays.length >> 1]!.toFixed(1)} ms, slowest ${delays[delays.length - 1]!.toFixed(1)} ms`)
    await writer.delete('campaigns', 'summer-sale')
    await until('every change', () => seen.length === 52, 30_000)
    const revisions = seen.map(change => change.revision)
    expect(revisions).to.deep.equal([...revisions].sort((a, b) => a - b))
    expect(seen.slice(1, 51).map(change => text(change.value))).to.deep.equal(Array.from({ length: 50 }, (_, i) => String(i)))
    expect(seen[51]).to.deep.include({ kind: 'campaigns', id: 'summer-sale', value: null })
  })

  it('gives a new watcher every current record first, then the changes after them', async () => {
    const writer = await node(1)
    await writer.put('accounts', 'acme', Buffer.from('A'))
    await writer.put('webhooks', 'acme/orders hook', Buffer.from('W'))
    const reader = await node(0)
    const seen: ConfigChange[] = []
    let readyAt = -1
    watches.push(await reader.watch({ onChange: change => seen.push(change), onReady: () => { readyAt = seen.length } }))
    await until('the initial records', () => readyAt >= 0, 30_000)
    const current = new Map(seen.map(change => [`${change.kind}/${change.id}`, text(change.value)]))
    expect(current.get('accounts/acme')).to.equal('A')
    expect(current.get('webhooks/acme/orders hook')).to.equal('W')
    expect(current.get('segments/s4')).to.equal('49')
    expect(current.get('campaigns/summer-sale')).to.equal(null)
    await writer.put('tokens', 'tok_1', Buffer.from('T'))
    await until('the change after the initial records', () => seen.length === readyAt + 1, 30_000)
    expect(seen[readyAt]).to.deep.include({ kind: 'tokens', id: 'tok_1' })
  })

  it('still delivers changes after each NATS server in turn was killed and restarted', async function () {
    this.timeout(180_000)
    const writer = await node(0)
    const reader = await node(1)
    const seen = await watchAll(reader)
    for (let server = 0; server < 3; server++) {
      const victim = cluster.servers[server]!
      await victim.kill()
      await victim.restart()
      await cluster.waitForQuorum()
      const started = performance.now()
      const id = `after-kill-${server}`
      // The write itself may need retries while the bucket's leader is elected again.
      const deadline = Date.now() + 30_000
      for (;;) {
        try {
          await writer.put('campaigns', id, Buffer.from('x'))
          break
        } catch (error) {
          if (Date.now() > deadline) throw error
          await new Promise(resolve => setTimeout(resolve, 100))
        }
      }
      await until(`the change after killing server ${server + 1}`, () => seen.some(change => change.id === id), 60_000)
      console.log(`      after server ${server + 1} of 3 was killed and restarted: change seen ${(performance.now() - started).toFixed(0)} ms after the write started`)
    }
  })

  it('keeps ids apart whatever characters they hold, and refuses unknown kinds and empty ids', () => {
    expect(configKey('campaigns', 'summer-sale_2')).to.equal('campaigns.summer-sale_2')
    expect(configKey('webhooks', 'a.b')).to.equal('webhooks.a=2Eb')
    expect(configKey('webhooks', 'a=2Eb')).to.equal('webhooks.a=3D2Eb')
    expect(configKey('eventTypes', 'pagé vue')).to.equal('eventTypes.pag=C3=A9=20vue')
    expect(() => configKey('nope' as 'accounts', 'x')).to.throw(ClusterError)
    expect(() => configKey('accounts', '')).to.throw(ClusterError)
  })

  describe('signatures (entries forged through NATS; the upgrade from unsigned records)', () => {
    /** A raw NATS client's view of a bucket: what anyone with write access can do. */
    async function raw (bucket: string): Promise<KV> {
      const nc = await connect({ servers: cluster.urls })
      connections.push(nc)
      return await new Kvm(nc).open(bucket)
    }

    it('refuses a record written without the key, delivers the next signed one', async () => {
      const bucket = 'BEACON_CONFIG_forged'
      const writer = await node(0, { bucket })
      const seen = await watchAll(await node(1, { bucket }))
      const forger = await raw(bucket)
      await retryWhileElecting(() => forger.put(configKey('users', 'intruder'), Buffer.from('{"role":"owner"}')))
      await writer.put('users', 'real', Buffer.from('R'))
      await until('the signed record', () => seen.length > 0, 20_000)
      expect(seen.map(change => change.id)).to.deep.equal(['real'])
      expect(text(seen[0]!.value)).to.equal('R')
    })

    it('with BEACON_CLUSTER_RESIGN, accepts the unsigned records present at start and writes them back signed; refuses those written after', async () => {
      const bucket = 'BEACON_CONFIG_upgrade'
      await node(0, { bucket })
      const kv = await raw(bucket)
      // Records of a release before signatures, and one signed by the previous key (a rotation).
      const previous = randomBytes(32)
      const current = randomBytes(32)
      // A new bucket may still be electing its leader.
      await retryWhileElecting(() => kv.put(configKey('accounts', 'acme'), Buffer.from('A')))
      await kv.put(configKey('users', 'u1'), Buffer.from('U'))
      await kv.put(configKey('campaigns', 'acme/old'), new EntrySigner([previous]).sign(bucket, configKey('campaigns', 'acme/old'), Buffer.from('C')))
      const rotated = new EntrySigner([current, previous])

      // Without the setting: refused.
      const strict = await watchAll(await node(2, { bucket, signer: rotated }))
      expect(strict.map(change => change.id)).to.deep.equal(['acme/old'])

      const upgrading = await watchAll(await node(0, { bucket, signer: rotated, resign: true }))
      expect(upgrading.map(change => `${change.kind}.${change.id}=${text(change.value)}`)).to.deep.equal(['accounts.acme=A', 'users.u1=U', 'campaigns.acme/old=C'])
      for (const [key, value] of [[configKey('accounts', 'acme'), 'A'], [configKey('users', 'u1'), 'U'], [configKey('campaigns', 'acme/old'), 'C']] as const) {
        await until(`${key} re-signed`, async () => {
          const entry = await kv.get(key)
          const opened = entry === null ? null : new EntrySigner([current]).open(bucket, key, entry.value)
          return opened?.ok === true && text(opened.value) === value
        }, 20_000, 20)
      }
      // The window is the start only: an unsigned record written now is refused even there.
      const before = upgrading.length
      await kv.put(configKey('users', 'late'), Buffer.from('L'))
      await (await node(1, { bucket, signer: rotated })).put('users', 'marker', Buffer.from('M'))
      await until('the marker', () => upgrading.some(change => change.id === 'marker'), 20_000)
      // The records it re-signed came back with their values unchanged: not delivered again.
      expect(upgrading.slice(before).map(change => change.id)).to.deep.equal(['marker'])
    })
  })
})
