import { expect } from 'chai'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { randomBytes } from 'node:crypto'
import { EntrySigner } from '../../src/cluster/entry-signer.js'
import { SessionKv } from '../../src/cluster/session-kv.js'
import { startNatsCluster, type NatsCluster } from '../helpers/nats-cluster.js'

describe('cluster: opening a replicated KV bucket right after it was created', function () {
  this.timeout(120_000)
  let cluster: NatsCluster
  const connections: NatsConnection[] = []

  before(async () => {
    cluster = await startNatsCluster()
    for (const url of cluster.urls) connections.push(await connect({ servers: url }))
  })

  after(async () => {
    for (const nc of connections) await nc.close()
    await cluster?.close()
  })

  it('opens, reads and watches a bucket three nodes create at once, each through its own server', async () => {
    const failures: string[] = []
    for (let round = 0; round < 12; round++) {
      const bucket = `OPEN_RACE_${round}`
      await Promise.all(connections.map(async nc => {
        try {
          const kv = await SessionKv.open({ nc, bucket, replicas: 3, ttlMs: 60_000, signer: new EntrySigner([randomBytes(32)]) })
          const watch = await kv.watch(() => {})
          watch.stop()
        } catch (error) {
          failures.push(`${bucket}: ${String(error)}`)
        }
      }))
    }
    expect(failures).to.deep.equal([])
  })
})
