import { expect } from 'chai'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { Balancer, systemTimers, type LossReason, type Timers } from '../../src/cluster/balancer.js'
import { ClusterError } from '../../src/cluster/errors.js'
import { LeaseTable, type Lease } from '../../src/cluster/leases.js'
import { openLeaseNode } from '../helpers/lease-nodes.js'
import { startNatsCluster, type NatsCluster } from '../helpers/nats-cluster.js'

const PARTITIONS = 64
const LEASE_MS = 1500

/** Real timers that can be frozen: while frozen, due callbacks wait, as in a process stopped with SIGSTOP. */
class FreezableTimers implements Timers {
  frozen = false
  private readonly due: Array<() => void> = []

  setTimeout (fn: () => void, ms: number): unknown {
    return systemTimers.setTimeout(() => { if (this.frozen) this.due.push(fn); else fn() }, ms)
  }

  clearTimeout (handle: unknown): void { systemTimers.clearTimeout(handle) }

  thaw (): void {
    this.frozen = false
    for (const fn of this.due.splice(0)) fn()
  }
}

interface Node {
  id: string
  balancer: Balancer
  table: LeaseTable
  timers: FreezableTimers
  lost: Array<{ partition: number, reason: LossReason }>
  acquired: number[]
  released: number[]
}

describe('cluster partition leases on a 3-server NATS cluster (R3 buckets)', function () {
  this.timeout(90_000)
  let cluster: NatsCluster
  const connections: NatsConnection[] = []
  const nodes = new Map<string, Node>()

  async function startNode (id: string): Promise<Node> {
    const timers = new FreezableTimers()
    const lost: Node['lost'] = []
    const acquired: number[] = []
    const released: number[] = []
    const { nc, table, balancer } = await openLeaseNode({
      urls: cluster.urls, id, leaseMs: LEASE_MS, partitions: PARTITIONS, timers,
      onAcquired: partition => { acquired.push(partition) },
      onLost: (partition, reason) => { lost.push({ partition, reason }) },
      onReleasing: partition => { released.push(partition) },
    })
    connections.push(nc)
    const node: Node = { id, table, timers, lost, acquired, released, balancer }
    nodes.set(id, node)
    await balancer.start()
    return node
  }

  /** Waits until the running nodes hold every partition exactly once, each within one of its fair share. */
  async function balanced (ids: string[], timeoutMs = 30_000): Promise<number> {
    const started = performance.now()
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const owned = ids.map(id => nodes.get(id)!.balancer.owned())
      const all = owned.flat()
      expect(new Set(all).size, 'a partition held by two nodes at once').to.equal(all.length)
      const share = Math.ceil(PARTITIONS / ids.length)
      if (all.length === PARTITIONS && owned.every(list => list.length <= share && list.length >= share - ids.length)) {
        return performance.now() - started
      }
      if (Date.now() > deadline) throw new Error(`not balanced within ${timeoutMs} ms: ${owned.map(list => list.length).join('/')}`)
      await new Promise(resolve => setTimeout(resolve, 20))
    }
  }

  /** The holders the KV bucket shows (read through the first node's table). */
  async function holdersInKv (): Promise<Map<number, string>> {
    const table = nodes.values().next().value!.table
    const out = new Map<number, string>()
    for (let partition = 0; partition < PARTITIONS; partition++) {
      const entry = await table.kv.get(LeaseTable.key(partition))
      if (entry !== null && entry.operation === 'PUT') out.set(partition, entry.string())
    }
    return out
  }

  function sizes (ids: string[]): string {
    return ids.map(id => `${id}:${nodes.get(id)!.balancer.owned().length}`).join(' ')
  }

  before(async () => { cluster = await startNatsCluster() })
  after(async () => {
    for (const node of nodes.values()) {
      node.timers.thaw()
      await node.balancer.close().catch(() => {})
    }
    for (const nc of connections) await nc.close()
    await cluster?.close()
  })

  it('grants a lease to one holder at a time; a stale release leaves the next holder\'s lease alone', async () => {
    const tables = await Promise.all(['x', 'y'].map(async node => {
      const nc = await connect({ servers: cluster.urls })
      connections.push(nc)
      return LeaseTable.open({ nc, bucket: 'BEACON_LEASES_unit', leaseMs: 60_000, replicas: 3, node })
    }))
    const [x, y] = tables as [LeaseTable, LeaseTable]
    const first = await x.acquire(7)
    expect(first).not.to.equal(null)
    expect(await y.acquire(7)).to.equal(null)
    const renewed = await x.renew(first!)
    expect(renewed.revision).to.be.greaterThan(first!.revision)
    const stale = await x.renew(first!).then(() => null, (error: unknown) => error)
    expect((stale as ClusterError).code).to.equal('CLUSTER_LEASE_LOST')
    await x.release(renewed)
    expect(await x.kv.get(LeaseTable.key(7))).to.equal(null)
    const second = await y.acquire(7)
    expect(second).not.to.equal(null)
    await x.release(renewed) // late and stale: refused by the compare-and-set, nothing purged
    expect((await y.kv.get(LeaseTable.key(7)))?.string()).to.equal('y')
    expect((await y.renew(second!)).revision).to.be.greaterThan(second!.revision)
  })

  it('splits 64 partitions evenly between two nodes, then three, and the KV bucket agrees', async () => {
    await startNode('a')
    await startNode('b')
    await balanced(['a', 'b'])
    expect(nodes.get('a')!.balancer.owned()).to.have.length(32)
    await startNode('c')
    const ms = await balanced(['a', 'b', 'c'])
    console.log(`      rebalanced to three nodes in ${ms.toFixed(0)} ms: ${sizes(['a', 'b', 'c'])}`)
    const kv = await holdersInKv()
    for (const id of ['a', 'b', 'c']) {
      for (const partition of nodes.get(id)!.balancer.owned()) expect(kv.get(partition), `partition ${partition}`).to.equal(id)
    }
    expect(nodes.get('a')!.lost).to.deep.equal([])
  })

  it('gives a fourth node its share: the others give back their extra partitions', async () => {
    const before = [...nodes.values()].reduce((sum, node) => sum + node.released.length, 0)
    await startNode('d')
    const ms = await balanced(['a', 'b', 'c', 'd'])
    console.log(`      a fourth node took its share in ${ms.toFixed(0)} ms: ${sizes(['a', 'b', 'c', 'd'])}`)
    for (const id of ['a', 'b', 'c', 'd']) expect(nodes.get(id)!.balancer.owned()).to.have.length(16)
    const released = [...nodes.values()].reduce((sum, node) => sum + node.released.length, 0) - before
    expect(released).to.be.at.least(16)
    for (const id of ['a', 'b', 'c']) expect(nodes.get(id)!.lost).to.deep.equal([])
  })

  it('hands a closing node\'s partitions over at once: its leases are released, not left to expire', async () => {
    const leaving = nodes.get('d')!
    const theirs = leaving.balancer.owned()
    const started = performance.now()
    await leaving.balancer.close()
    nodes.delete('d')
    expect(leaving.released).to.include.members(theirs)
    // Right after close() the keys are released (or already taken by another node), none still held by d.
    const kv = await holdersInKv()
    for (const partition of theirs) expect(kv.get(partition), `partition ${partition}`).not.to.equal('d')
    const ms = await balanced(['a', 'b', 'c'])
    console.log(`      graceful handover of ${theirs.length} partitions: ${(performance.now() - started).toFixed(0)} ms (lease time ${LEASE_MS} ms)`)
    expect(leaving.lost).to.deep.equal([])
    expect(ms).to.be.lessThan(30_000)
  })

  it('gives a node that stops renewing no more than the lease time: the others take its partitions and its late renew is refused', async () => {
    const paused = nodes.get('c')!
    const theirs = paused.balancer.owned()
    const leases: Lease[] = paused.balancer.status().map(({ partition, revision }) => ({ partition, revision }))
    const started = performance.now()
    paused.timers.frozen = true
    const deadline = Date.now() + 30_000
    for (;;) {
      const others = [...nodes.get('a')!.balancer.owned(), ...nodes.get('b')!.balancer.owned()]
      if (theirs.every(partition => others.includes(partition))) break
      if (Date.now() > deadline) throw new Error(`the paused node's partitions were not taken over: ${sizes(['a', 'b', 'c'])}`)
      await new Promise(resolve => setTimeout(resolve, 20))
    }
    const takeoverMs = performance.now() - started
    console.log(`      takeover of ${theirs.length} partitions from a node that stopped renewing: ${takeoverMs.toFixed(0)} ms (lease time ${LEASE_MS} ms)`)
    expect(takeoverMs).to.be.lessThan(30_000)

    // The stale holder's compare-and-set is refused by the server.
    const late = await paused.table.renew(leases[0]!).then(() => null, (error: unknown) => error)
    expect(late).to.be.instanceOf(ClusterError)
    expect((late as ClusterError).code).to.equal('CLUSTER_LEASE_LOST')

    // Woken up, it drops every partition it held (before writing anything), then rejoins and takes its share.
    paused.timers.thaw()
    await balanced(['a', 'b', 'c'])
    expect(paused.lost.map(loss => loss.partition).sort((x, y) => x - y)).to.deep.equal([...theirs].sort((x, y) => x - y))
    for (const loss of paused.lost) expect(loss.reason).to.be.oneOf(['expired', 'refused'])
  })

  it('recovers when the NATS server leading the lease bucket is killed: every partition held again, never by two nodes', async () => {
    const ids = ['a', 'b', 'c']
    const lostBefore = ids.reduce((sum, id) => sum + nodes.get(id)!.lost.length, 0)
    const nc = connections[0]!
    const info = await (await import('@nats-io/jetstream')).jetstreamManager(nc).then(jsm => jsm.streams.info('KV_BEACON_LEASES_test'))
    const victim = cluster.servers[cluster.names.indexOf(info.cluster?.leader ?? '')]
    if (victim === undefined) throw new Error('no leader for the lease bucket')
    const started = performance.now()
    await victim.kill()
    try {
      // Let the lease time pass so that a stalled bucket shows, then wait for the balance to come back.
      await new Promise(resolve => setTimeout(resolve, LEASE_MS))
      const ms = await balanced(ids, 60_000)
      const lost = ids.reduce((sum, id) => sum + nodes.get(id)!.lost.length, 0) - lostBefore
      console.log(`      lease bucket leader killed: ${lost} of ${PARTITIONS} partitions lost (lease time ${LEASE_MS} ms), ` +
        `all held again after ${(performance.now() - started).toFixed(0)} ms (${ms.toFixed(0)} ms after the lease time): ${sizes(ids)}`)
    } finally {
      await victim.restart()
      await cluster.waitForQuorum()
    }
  })
})
