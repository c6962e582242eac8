import { expect } from 'chai'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { jetstream, jetstreamManager } from '@nats-io/jetstream'
import net, { type AddressInfo } from 'node:net'
import { startNatsCluster, type NatsCluster } from '../helpers/nats-cluster.js'
import { freePort, startNatsServer } from '../helpers/nats-server.js'

describe('test helper: a 3-server NATS cluster', function () {
  this.timeout(60_000)
  let cluster: NatsCluster
  let nc: NatsConnection

  before(async () => {
    cluster = await startNatsCluster()
    nc = await connect({ servers: cluster.urls, reconnectTimeWait: 100, maxReconnectAttempts: -1 })
  })
  after(async () => {
    await nc?.close()
    await cluster?.close()
  })

  it('runs three servers on distinct loopback ports, none of them the shared 4222', () => {
    expect(cluster.urls).to.have.length(3)
    expect(new Set(cluster.urls).size).to.equal(3)
    for (const url of cluster.urls) {
      expect(url).to.match(/^nats:\/\/127\.0\.0\.1:\d+$/)
      expect(url).not.to.equal('nats://127.0.0.1:4222')
    }
    expect(new Set(cluster.servers.map(server => server.storeDir)).size).to.equal(3)
  })

  it('keeps an R3 stream writable with one server killed, and the restarted server catches up', async () => {
    const jsm = await jetstreamManager(nc)
    const js = jetstream(nc, { timeout: 5000 })
    await jsm.streams.add({ name: 'HELPER_R3', subjects: ['helper.r3'], num_replicas: 3 })
    // A stream just made may still elect its leader (no responders meanwhile: seen on a loaded machine).
    expect(await publishWithRetry(js, 'helper.r3', 'one')).to.equal(1)
    const victim = cluster.servers[2]!
    await victim.kill()
    expect(victim.running).to.equal(false)
    const ack = await publishWithRetry(js, 'helper.r3', 'two')
    expect(ack).to.equal(2)
    await victim.restart()
    expect(victim.running).to.equal(true)
    expect(victim.url).to.equal(cluster.urls[2])
    // Read through the restarted server alone: its replica must come back with both messages.
    const alone = await connect({ servers: victim.url })
    try {
      const deadline = Date.now() + 30_000
      const jsmAlone = await jetstreamManager(alone, { timeout: 5000, checkAPI: false })
      for (;;) {
        const info = await jsmAlone.streams.info('HELPER_R3').catch(() => null)
        const replicas = info?.cluster?.replicas ?? []
        if (info?.state.messages === 2 && replicas.length === 2 && replicas.every(replica => replica.current)) break
        if (Date.now() > deadline) {
          // Seen once in CI (nats-server 2.10.27, a loaded machine): the leader heard nothing from the
          // restarted replica for the whole 30 s, where its catch-up takes 2–6 s (48 rounds here under
          // load); the likely cause, a route left unconnected, is what the helper's route URLs avoid
          // (test/helpers/nats-cluster.ts). The servers' logs are the evidence such a stall leaves.
          const logs = cluster.servers.map((server, i) => `--- ${cluster.names[i]}:\n${server.output().slice(-3000)}`).join('\n')
          throw new Error(`the restarted server did not catch up: ${JSON.stringify(info?.cluster)}\n${logs}`)
        }
        await new Promise(resolve => setTimeout(resolve, 100))
      }
    } finally {
      await alone.close()
    }
  })
})

async function publishWithRetry (js: ReturnType<typeof jetstream>, subject: string, data: string): Promise<number> {
  const deadline = Date.now() + 30_000
  for (;;) {
    try {
      return (await js.publish(subject, data, { msgID: `${subject}-${data}` })).seq
    } catch (error) {
      if (Date.now() > deadline) throw error
      await new Promise(resolve => setTimeout(resolve, 100))
    }
  }
}

describe('test helper: a cluster member whose route port is taken', function () {
  this.timeout(30_000)

  it('is refused at start (it answers clients, then exits): the cluster helper picks other ports, never runs a server short', async () => {
    // What a port picked free and then taken by another process looks like to nats-server: it listens
    // for clients, says it is ready, then fails to listen for routes and exits.
    // Its port was picked by the kernel among those other test processes pick too: a cluster of theirs
    // whose member was stopped may try its old route port here. Such a connection is dropped at once, so
    // close() (which waits for every connection to end) cannot wait on a peer that never hangs up.
    const taken = net.createServer(socket => socket.destroy())
    await new Promise<void>(resolve => taken.listen(0, '127.0.0.1', resolve))
    const routePort = (taken.address() as AddressInfo).port
    const peerPort = await freePort()
    try {
      const started = await startNatsServer({
        port: await freePort(),
        args: ['--server_name', 'taken-n1', '--cluster_name', 'taken', '--cluster', `nats://127.0.0.1:${routePort}`, '--routes', `nats-route://127.0.0.1:${peerPort}`],
      }).then(async server => { await server.close(); return 'started' }, (error: unknown) => (error as Error).message)
      expect(started).to.match(/Error listening on router port: .*address already in use/)
    } finally {
      await new Promise(resolve => taken.close(resolve))
    }
  })
})
