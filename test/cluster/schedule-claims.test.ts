// Schedule run claims (src/cluster/schedule-claims.ts) on a real 3-server NATS cluster, R3: of three
// nodes, each on its own server, claiming the same parts of the same runs at once, exactly one gets
// each part (and gets it again when it asks again); other runs, parts and webhooks are claimed apart; odd ids make valid keys.

import { expect } from 'chai'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { startNatsCluster, type NatsCluster } from '../helpers/nats-cluster.js'
import { claimKey, ScheduleClaims } from '../../src/cluster/schedule-claims.js'

describe('schedule run claims (3-server NATS cluster, R3)', function () {
  this.timeout(120_000)
  let cluster: NatsCluster
  const connections: NatsConnection[] = []

  async function node (server: number): Promise<ScheduleClaims> {
    const urls = [cluster.urls[server]!, ...cluster.urls.filter((_, i) => i !== server)]
    const nc = await connect({ servers: urls, noRandomize: true })
    connections.push(nc)
    return ScheduleClaims.open({ nc, cluster: 'test', replicas: 3 })
  }

  before(async () => {
    cluster = await startNatsCluster()
    await cluster.waitForQuorum()
  })
  after(async () => {
    for (const nc of connections) await nc.close()
    await cluster?.close()
  })

  it('gives each (webhook, run, part) to exactly one of three nodes claiming it at once', async () => {
    const nodes = [await node(0), await node(1), await node(2)]
    const runs = [1_800_000_000_000, 1_800_000_010_000]
    const parts: Array<number | 'all'> = ['all', 0, 1, 63]
    const winners = new Map<string, string[]>()
    await Promise.all(runs.flatMap(run => parts.flatMap(part => nodes.map(async (claims, i) => {
      // Each node claims each part twice, as a run made again after a failure would.
      for (let attempt = 0; attempt < 2; attempt++) {
        if (await claims.claim('acc-1', 'hourly', run, part, `node-${i}`)) {
          const key = `${run}/${part}`
          winners.set(key, [...winners.get(key) ?? [], `node-${i}`])
        }
      }
    }))))
    expect(winners.size).to.equal(runs.length * parts.length)
    // One node per part, and it gets its claim again when it asks again.
    for (const [key, who] of winners) expect(who, key).to.have.length(2).and.satisfy((names: string[]) => names[0] === names[1])
    // Another webhook's or account's run is its own.
    expect(await nodes[0]!.claim('acc-1', 'daily', runs[0]!, 'all', 'node-0')).to.equal(true)
    expect(await nodes[1]!.claim('acc-2', 'hourly', runs[0]!, 'all', 'node-1')).to.equal(true)
  })

  it('makes valid, distinct keys of ids with any character', async () => {
    expect(claimKey('acc-1', 'a.b/c d', 5, 'all')).to.equal('acc-1.a=2Eb=2Fc=20d.5.all')
    expect(claimKey('acc-1', 'a.b', 5, 3)).not.to.equal(claimKey('acc-1', 'a=2Eb', 5, 3))
    const claims = await node(0)
    expect(await claims.claim('acc-1', 'ünï.cödé/*>', 5, 'all', 'node-0')).to.equal(true)
    expect(await claims.claim('acc-1', 'ünï.cödé/*>', 5, 'all', 'node-1')).to.equal(false)
  })
})
