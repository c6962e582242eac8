import { expect } from 'chai'
import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import type { NatsConnection } from '@nats-io/transport-node'
import type { Balancer } from '../../src/cluster/balancer.js'
import { openLeaseNode } from '../helpers/lease-nodes.js'
import { startNatsCluster, type NatsCluster } from '../helpers/nats-cluster.js'
import { until } from '../helpers/until.js'

const PARTITIONS = 64
const LEASE_MS = 1500
const LEASE_NODE = fileURLToPath(new URL('../helpers/lease-node.ts', import.meta.url))

/** A lease node in a child process, its reports parsed from stdout. */
class ChildNode {
  owned: number[] = []
  lost: Array<{ lost: number, reason: string }> = []
  private readonly exited: Promise<void>

  constructor (readonly process: ChildProcess) {
    let buffered = ''
    process.stdout!.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('utf8')
      let newline: number
      while ((newline = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, newline)
        buffered = buffered.slice(newline + 1)
        const event = JSON.parse(line) as { owned?: number[], lost?: number, reason?: string }
        if (event.owned !== undefined) this.owned = event.owned
        if (event.lost !== undefined) this.lost.push({ lost: event.lost, reason: event.reason! })
      }
    })
    this.exited = new Promise(resolve => process.once('exit', () => resolve()))
  }

  async stop (): Promise<void> {
    if (this.process.exitCode !== null || this.process.signalCode !== null) return
    this.process.kill('SIGCONT')
    this.process.kill('SIGTERM')
    const timer = setTimeout(() => this.process.kill('SIGKILL'), 10_000)
    await this.exited
    clearTimeout(timer)
  }
}

describe('cluster partition leases: a node whose lease time runs out (a process stopped with SIGSTOP, a clock ahead)', function () {
  this.timeout(90_000)
  let cluster: NatsCluster
  const connections: NatsConnection[] = []
  const balancers = new Map<string, Balancer>()
  let child: ChildNode | null = null

  /** How far each in-process node's clock runs ahead of the system clock. */
  const skewMs = new Map<string, number>()
  const lost = new Map<string, Array<{ partition: number, reason: string }>>()

  async function startNode (id: string): Promise<Balancer> {
    skewMs.set(id, 0)
    lost.set(id, [])
    const { nc, balancer } = await openLeaseNode({
      urls: cluster.urls, id, leaseMs: LEASE_MS, partitions: PARTITIONS,
      clock: { nowMs: () => Date.now() + skewMs.get(id)! },
      onAcquired: () => {},
      onLost: (partition, reason) => { lost.get(id)!.push({ partition, reason }) },
    })
    connections.push(nc)
    balancers.set(id, balancer)
    await balancer.start()
    return balancer
  }

  before(async () => { cluster = await startNatsCluster() })
  after(async () => {
    await child?.stop()
    for (const balancer of balancers.values()) await balancer.close().catch(() => {})
    for (const nc of connections) await nc.close()
    await cluster?.close()
  })

  it('loses its partitions to the others after the lease time, and on SIGCONT drops them all before rejoining', async () => {
    const a = await startNode('a')
    const b = await startNode('b')
    child = new ChildNode(spawn(process.execPath, ['--import', 'tsx', LEASE_NODE, 'c', String(LEASE_MS), String(PARTITIONS), cluster.urls.join(',')], {
      stdio: ['ignore', 'pipe', 'inherit'],
    }))
    const everyPartitionOnce = (lists: number[][]): boolean => {
      const all = lists.flat()
      return all.length === PARTITIONS && new Set(all).size === PARTITIONS
    }
    await until('three nodes to share the partitions', () => child!.owned.length >= 20 && everyPartitionOnce([a.owned(), b.owned(), child!.owned]), 30_000)
    const theirs = [...child.owned]

    const started = performance.now()
    child.process.kill('SIGSTOP')
    await until('the others to take the stopped node\'s partitions', () => theirs.every(partition => a.owned().includes(partition) || b.owned().includes(partition)), 30_000)
    const takeoverMs = performance.now() - started
    console.log(`      takeover of ${theirs.length} partitions from a process stopped with SIGSTOP: ${takeoverMs.toFixed(0)} ms (lease time ${LEASE_MS} ms)`)
    expect(everyPartitionOnce([a.owned(), b.owned()])).to.equal(true)

    child.process.kill('SIGCONT')
    await until('the woken node to drop every partition it held', () => theirs.every(partition => child!.lost.some(loss => loss.lost === partition)), 30_000)
    for (const loss of child.lost) expect(loss.reason).to.be.oneOf(['expired', 'refused'])
    await until('the woken node to take its share again', () => child!.owned.length >= 20 && everyPartitionOnce([a.owned(), b.owned(), child!.owned]), 30_000)
  })

  it('stops counting a partition as its own the moment its clock passes the lease time, before any renew is refused', async () => {
    const a = balancers.get('a')!
    const b = balancers.get('b')!
    await until('three nodes to share the partitions', () => child!.owned.length >= 20 && a.owned().length >= 20 && b.owned().length >= 20, 30_000)
    const before = lost.get('a')!.length
    const held = a.owned()
    // The write path asks holds() before each write: with no round trip, a lease past its time is gone.
    skewMs.set('a', LEASE_MS)
    for (const partition of held) expect(a.holds(partition), `partition ${partition}`).to.equal(false)
    expect(lost.get('a')!.slice(before).map(loss => loss.partition).sort((x, y) => x - y)).to.deep.equal(held)
    for (const loss of lost.get('a')!.slice(before)) expect(loss.reason).to.equal('expired')
    skewMs.set('a', 0)
    await until('the node to take its share again', () => a.owned().length >= 20 && child!.owned.length + a.owned().length + b.owned().length === PARTITIONS, 30_000)
  })
})
