// Ownership under churn, with real processes (3 NATS servers R3, 3 Beacon nodes, lease 1.5 s): cycles of
// SIGKILL of a node, either restarted at once on its data folder under the same node id (its members key
// and leases still there: it joins once they lapse) or restarted after the survivors took its partitions
// over. After each cycle every node must converge to its share (at most ceil(P/N), every partition held
// by exactly one running node, every node agreeing) within a bounded time; and after each takeover the
// survivors' beacon_cluster_takeovers_total must have grown by exactly the partitions the dead node held.

import { expect } from 'chai'
import { CLUSTER_LEASE_MS, CLUSTER_PARTITIONS, startBeaconCluster, takeoversOf, type BeaconCluster } from '../helpers/beacon-cluster.js'

const CYCLES = 6
/** From a restarted node's start to the cluster settled: its join waits up to a lease time and a half. */
const SETTLE_MS = 15_000

describe('cluster ownership under SIGKILL and restart cycles (real processes)', function () {
  this.timeout(300_000)
  let cluster: BeaconCluster

  before(async () => {
    cluster = await startBeaconCluster(3)
    await cluster.settled()
  })
  after(async () => { await cluster?.close() })

  it(`${CYCLES} cycles of SIGKILL, alternately restarted at once under the same id and after the takeover: every node back to its share each time, every lost partition counted once as a takeover`, async () => {
    const settleTimes: number[] = []
    for (let cycle = 1; cycle <= CYCLES; cycle++) {
      const victim = (cycle - 1) % cluster.members.length
      const member = cluster.members[victim]!
      const held = (await cluster.status(member)).owned.length
      const survivors = cluster.live().filter(other => other !== member)
      const before = await Promise.all(survivors.map(takeoversOf))
      await cluster.kill(victim)
      const killedAt = Date.now()
      const atOnce = cycle % 2 === 0
      if (!atOnce) {
        await cluster.settled({ timeoutMs: SETTLE_MS })
        const after = await Promise.all(survivors.map(takeoversOf))
        const counted = after.map((t, i) => t.count - before[i]!.count)
        console.log(`      cycle ${cycle}: ${member.id} (${held} partitions) SIGKILLed, survivors settled ${Date.now() - killedAt} ms later, takeovers counted ${counted.join(' + ')}`)
        expect(counted.reduce((a, b) => a + b, 0), `takeovers counted by ${survivors.map(s => s.id).join(', ')}`).to.equal(held)
      }
      await cluster.restart(victim)
      const startedAt = Date.now()
      await cluster.settled({ timeoutMs: SETTLE_MS })
      settleTimes.push(Date.now() - startedAt)
      const owned = await Promise.all(cluster.live().map(async node => (await cluster.status(node)).owned.length))
      console.log(`      cycle ${cycle}: ${member.id} restarted ${atOnce ? 'at once' : 'after the takeover'}, settled ${Date.now() - startedAt} ms after it was up (${Date.now() - killedAt} ms after the kill): ${owned.join('/')} partitions`)
      expect(owned.reduce((a, b) => a + b, 0)).to.equal(CLUSTER_PARTITIONS)
      for (const count of owned) expect(count).to.be.at.most(Math.ceil(CLUSTER_PARTITIONS / 3))
    }
    console.log(`      lease ${CLUSTER_LEASE_MS} ms; settled after each restart in ${Math.min(...settleTimes)}–${Math.max(...settleTimes)} ms`)
  })
})
