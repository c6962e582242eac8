// The balancer on a real 3-server NATS cluster (R3 buckets), in-process nodes:
// - A handover slower than the lease time (a node giving partitions back to a joining node waits for its
//   in-flight writes, snapshot and relay: onReleasing) must not cost the node its other leases or its
//   place among the members. Before handovers ran beside the balancer's rounds, the round waiting for them
//   sent no renewal and no heartbeat: the node lost every lease, dropped out of the members' view, and the
//   joining node, seeing itself alone, took all 64 partitions and kept them as long as the handover hung
//   (the "survivor kept all 64 partitions" of docs/internals/cluster.md).
// - Takeovers: every partition of a lost node is acquired by a survivor that saw its earlier lease
//   (freeSinceMs set), also when the first survivor to take it fails its recovery and gives it back (a
//   refused acquire in between used to make the node forget the earlier lease: the takeover went
//   uncounted).
// - A handover that never ends is cut short after handoverLimitMs: the partition dropped and its lease
//   released for the joining node, and not taken back while its release still hangs.

import { expect } from 'chai'
import { connect, Empty, headers, type NatsConnection } from '@nats-io/transport-node'
import { jetstream, jetstreamManager } from '@nats-io/jetstream'
import { LeaseTable } from '../../src/cluster/leases.js'
import type { LossReason } from '../../src/cluster/balancer.js'
import { openLeaseNode, type LeaseNode } from '../helpers/lease-nodes.js'
import { startNatsCluster, type NatsCluster } from '../helpers/nats-cluster.js'
import { until } from '../helpers/until.js'

const PARTITIONS = 64
const LEASE_MS = 1500

describe('balancer: handovers and takeovers (3-server NATS cluster, R3 buckets)', function () {
  this.timeout(90_000)
  let cluster: NatsCluster
  const connections: NatsConnection[] = []
  const nodes: LeaseNode[] = []
  let open: () => void = () => {}

  before(async () => { cluster = await startNatsCluster() })
  after(async () => {
    open()
    for (const node of nodes) await node.balancer.close().catch(() => {})
    for (const nc of connections) await nc.close()
    await cluster?.close()
  })

  /**
   * Node `first` holding every partition, whose handovers hang (as a keeper whose release waits for
   * something that does not come: a relay that never settles) until `open()`; then node `second` started.
   */
  async function handingOverNodes (first: string, second: string, partitions: number, handoverLimitMs?: number): Promise<{ a: LeaseNode, b: LeaseNode, handingOver: Set<number>, lostByA: Array<{ partition: number, reason: LossReason }> }> {
    const gate = new Promise<void>(resolve => { open = resolve })
    const handingOver = new Set<number>()
    const lostByA: Array<{ partition: number, reason: LossReason }> = []
    const a = await openLeaseNode({
      urls: cluster.urls, id: first, leaseMs: LEASE_MS, partitions, handoverLimitMs,
      onAcquired: () => {},
      onLost: (partition, reason) => { lostByA.push({ partition, reason }) },
      onReleasing: async partition => {
        handingOver.add(partition)
        await gate
      },
    })
    connections.push(a.nc)
    nodes.push(a)
    await a.balancer.start()
    await until(`${first} holding every partition`, () => a.balancer.owned().length === partitions, 30_000, 20)
    const b = await openLeaseNode({ urls: cluster.urls, id: second, leaseMs: LEASE_MS, partitions, onAcquired: () => {}, onLost: () => {} })
    connections.push(b.nc)
    nodes.push(b)
    await b.balancer.start()
    return { a, b, handingOver, lostByA }
  }

  it('keeps renewing every lease (those being handed over too) and beating while a handover hangs; the joining node never takes more than its share', async () => {
    const { a, b, handingOver, lostByA } = await handingOverNodes('a', 'b', PARTITIONS)
    await until('a handing 32 partitions over', () => handingOver.size === PARTITIONS / 2, 10_000, 20)

    // Three lease times with the handovers hung: a keeps all 64 leases (32 kept, 32 being handed over),
    // b takes none of them (nothing is free) and never more than its share.
    const deadline = Date.now() + 3 * LEASE_MS
    let mostByB = 0
    while (Date.now() < deadline) {
      mostByB = Math.max(mostByB, b.balancer.owned().length)
      expect(a.balancer.owned(), 'a lost leases while a handover hung').to.have.length(PARTITIONS)
      await new Promise(resolve => setTimeout(resolve, 20))
    }
    expect(lostByA).to.deep.equal([])
    expect(mostByB).to.equal(0)

    // The handovers finish: the partitions go to b, 32 each, never two holders.
    const opened = performance.now()
    open()
    await until('32 partitions each', () => {
      const owned = [a.balancer.owned(), b.balancer.owned()]
      const all = owned.flat()
      expect(new Set(all).size, 'a partition held by two nodes at once').to.equal(all.length)
      return all.length === PARTITIONS && owned.every(list => list.length === PARTITIONS / 2)
    }, 15_000, 20)
    console.log(`      balanced 32/32 ${(performance.now() - opened).toFixed(0)} ms after the handovers were let through`)
    expect(lostByA).to.deep.equal([])
    expect([...handingOver].sort((x, y) => x - y)).to.deep.equal(b.balancer.owned())
    await Promise.all(nodes.splice(0).map(node => node.balancer.close()))
  })

  it('cuts a handover still hanging after handoverLimitMs short: the partition dropped (onLost "handover"), its lease released and taken by the joining node, not taken back while its release hangs', async () => {
    const partitions = 16
    const { a, b, handingOver, lostByA } = await handingOverNodes('h1', 'h2', partitions, 2 * LEASE_MS)
    await until('h1 handing 8 partitions over', () => handingOver.size === partitions / 2, 10_000, 20)
    const handingSince = Date.now()
    // Within the limit the handovers just hang: h1 keeps every lease, h2 gets nothing.
    while (Date.now() - handingSince < LEASE_MS) {
      expect(b.balancer.owned()).to.deep.equal([])
      expect(a.balancer.owned()).to.have.length(partitions)
      await new Promise(resolve => setTimeout(resolve, 20))
    }
    await until('8 partitions each', () => b.balancer.owned().length === partitions / 2 && a.balancer.owned().length === partitions / 2, 15_000, 20)
    console.log(`      the hung handovers cut short and their partitions taken by h2 ${Date.now() - handingSince} ms after they began (limit ${2 * LEASE_MS} ms)`)
    const dropped = [...handingOver].sort((x, y) => x - y)
    expect(b.balancer.owned()).to.deep.equal(dropped)
    expect(lostByA.map(one => one.partition).sort((x, y) => x - y)).to.deep.equal(dropped)
    expect(lostByA.every(one => one.reason === 'handover')).to.equal(true)
    // Their releases still hang: h1 does not take them back (nor any other), over two lease times, nor
    // after the releases end.
    const until2 = Date.now() + 2 * LEASE_MS
    while (Date.now() < until2) {
      expect(b.balancer.owned()).to.deep.equal(dropped)
      await new Promise(resolve => setTimeout(resolve, 20))
    }
    open()
    await new Promise(resolve => setTimeout(resolve, LEASE_MS))
    expect(b.balancer.owned()).to.deep.equal(dropped)
    expect(a.balancer.owned()).to.have.length(partitions / 2)
    await Promise.all(nodes.splice(0).map(node => node.balancer.close()))
  })

  it('a lost node\'s partitions are each acquired after their earlier lease was seen gone, also when a first recovery fails and the lease is given back', async () => {
    interface Acquisition { node: string, partition: number, freeSinceMs: number | null, failed: boolean }
    const acquisitions: Acquisition[] = []
    let failing = false
    const failedOnce = new Set<number>()
    const open3 = async (id: string): Promise<LeaseNode> => {
      const node = await openLeaseNode({
        urls: cluster.urls, id, leaseMs: LEASE_MS, partitions: PARTITIONS,
        onAcquired: (partition, freeSinceMs) => {
          // Node x fails the first recovery of each partition once the victim is gone (as a changelog read
          // refused): the balancer gives the lease back at once.
          const failed = id === 'x' && failing && !failedOnce.has(partition)
          if (failed) failedOnce.add(partition)
          acquisitions.push({ node: id, partition, freeSinceMs, failed })
          if (failed) throw new Error('recovery refused')
        },
        onLost: () => {},
      })
      connections.push(node.nc)
      nodes.push(node)
      await node.balancer.start()
      return node
    }
    const [x, y, z] = [await open3('x'), await open3('y'), await open3('z')]
    await until('all held, 20 to 22 each', () => [x, y, z].every(node => node.balancer.owned().length >= 20) &&
      new Set([x, y, z].flatMap(node => node.balancer.owned())).size === PARTITIONS, 30_000, 20)
    const lost = z.balancer.owned()
    const from = acquisitions.length
    failing = true
    // As a SIGKILL: z's connection goes, its leases and its members key lapse.
    await z.nc.close()
    await until('x and y holding every partition', () => x.balancer.owned().length + y.balancer.owned().length === PARTITIONS &&
      new Set([...x.balancer.owned(), ...y.balancer.owned()]).size === PARTITIONS, 30_000, 20)
    const after = acquisitions.slice(from)
    const kept = after.filter(one => !one.failed && lost.includes(one.partition))
    const unseen = kept.filter(one => one.freeSinceMs === null).map(one => one.partition)
    console.log(`      ${lost.length} partitions of z: ${after.filter(one => one.failed).length} first recoveries failed at x and given back; ` +
      `${kept.length} acquisitions kept, ${unseen.length} without an earlier lease seen`)
    expect(failedOnce.size).to.be.above(0)
    expect(kept.map(one => one.partition).sort((a, b) => a - b)).to.deep.equal([...lost].sort((a, b) => a - b))
    expect(unseen, 'partitions acquired as if no earlier lease had been seen').to.deep.equal([])
    await Promise.all(nodes.splice(0).map(node => node.balancer.close().catch(() => {})))
  })

  it('an acquire refused between a release\'s delete marker and its purge does not make the node forget the earlier lease', async () => {
    // A holder w that releases in two steps, the delete marker now and the purge later, as LeaseTable.release
    // does with a moment between them.
    const nc = await connect({ servers: cluster.urls })
    connections.push(nc)
    const w = await LeaseTable.open({ nc, bucket: 'BEACON_LEASES_test', leaseMs: LEASE_MS, replicas: 3, node: 'w' })
    const lease = await w.acquire(0)
    expect(lease).not.to.equal(null)
    const renewing = setInterval(() => { void w.renew(lease!).then(renewed => { lease!.revision = renewed.revision }, () => {}) }, LEASE_MS / 3)
    const acquired: Array<{ partition: number, freeSinceMs: number | null }> = []
    const x = await openLeaseNode({
      urls: cluster.urls, id: 'x2', leaseMs: LEASE_MS, partitions: 2,
      onAcquired: (partition, freeSinceMs) => { acquired.push({ partition, freeSinceMs }) },
      onLost: () => {},
    })
    connections.push(x.nc)
    nodes.push(x)
    await x.balancer.start()
    await until('x2 holding partition 1', () => x.balancer.owned().includes(1), 15_000, 20)
    clearInterval(renewing)
    const subject = '$KV.BEACON_LEASES_test.p.0'
    const h = headers()
    h.set('KV-Operation', 'DEL')
    const marker = (await jetstream(nc).publish(subject, Empty, { headers: h, expect: { lastSubjectSequence: lease!.revision } })).seq
    const deletedAt = Date.now()
    // x2 sees the delete and tries to take the partition: refused while the marker is there.
    await new Promise(resolve => setTimeout(resolve, LEASE_MS / 2))
    expect(x.balancer.owned()).not.to.include(0)
    await (await jetstreamManager(nc)).streams.purge('KV_BEACON_LEASES_test', { filter: subject, seq: marker + 1 })
    await until('x2 holding partition 0', () => x.balancer.owned().includes(0), 15_000, 20)
    const taken = acquired.find(one => one.partition === 0)!
    console.log(`      partition 0 taken ${Date.now() - deletedAt} ms after the delete marker; freeSinceMs ${taken.freeSinceMs === null ? 'null' : `${taken.freeSinceMs - deletedAt} ms after it`}`)
    expect(taken.freeSinceMs, 'the earlier lease (w\'s) forgotten').not.to.equal(null)
    expect(taken.freeSinceMs! - deletedAt).to.be.within(-50, 1000)
    await Promise.all(nodes.splice(0).map(node => node.balancer.close().catch(() => {})))
  })
})
