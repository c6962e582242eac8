// Beacon in cluster mode under faults and concurrent load, real processes: a 3-server NATS JetStream
// cluster (R3) and 3 Beacon nodes (test/helpers/beacon-cluster.ts, lease 1.5 s). A load generator in this
// process (test/helpers/cluster-load.ts) sends attribute writes to many visitors and profiles and
// purchases with distinct order ids, round robin through the live nodes, while nodes are SIGKILLed,
// paused, SIGTERMed in turn, joined and removed, and a NATS server is killed. Afterwards every key is read
// back through every node: each acknowledged write is there (or a later attempted one), each visitor's
// purchase count lies between its acknowledged and its attempted order ids (a replay never counts twice).
// Requests may get 503 with Retry-After during a fault (counted and printed); any other status, or a
// request to a node that stayed up left unanswered, fails the test. Timings are printed, never asserted,
// except the issue's "a campaign created through node 1 is matched through node 3 within 1 s".

import { expect } from 'chai'
import { randomUUID } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { connect } from '@nats-io/transport-node'
import { jetstream, jetstreamManager } from '@nats-io/jetstream'
import { changelogStreamName, decode, type ChangelogRecord } from '../../src/cluster/changelog.js'
import { pauseProcess } from '../helpers/pause.js'
import { until } from '../helpers/until.js'
import { admin, post, type BeaconProcess } from '../helpers/beacon.js'
import { CLUSTER_LEASE_MS, CLUSTER_PARTITIONS, startBeaconCluster, type BeaconCluster, type ClusterMember } from '../helpers/beacon-cluster.js'
import { ClusterLoad, describeRetryAfter, retryAfterTotal, type LoadCounts } from '../helpers/cluster-load.js'

const KILL_CYCLES = 20

describe('Beacon cluster mode under faults and concurrent load (3 nodes, real processes)', function () {
  this.timeout(600_000)
  let cluster: BeaconCluster
  let load: ClusterLoad
  /** Members the load does not send to (about to be stopped, paused, or down). */
  const out = new Set<string>()

  before(async () => {
    cluster = await startBeaconCluster(3)
    await cluster.settled()
    await startAudit(cluster)
    load = new ClusterLoad({
      tenant: cluster.tenant,
      targets: () => cluster.live().filter(member => !out.has(member.id)).map(member => member.url),
      concurrency: 64,
      partitions: CLUSTER_PARTITIONS,
    })
  })
  // A failed test leaves the nodes' and NATS servers' logs in a temp folder, named in the output.
  afterEach(function () {
    if (this.currentTest?.state !== 'failed') return
    const dir = mkdtempSync(join(tmpdir(), 'beacon-faults-logs-'))
    for (const member of cluster.live()) writeFileSync(join(dir, `${member.id}.log`), member.process!.output())
    for (const [i, server] of cluster.nats.servers.entries()) writeFileSync(join(dir, `${cluster.nats.names[i]}.log`), server.output())
    console.log(`      logs of the running nodes and NATS servers: ${dir}`)
  })
  after(async () => {
    await load?.stop()
    await cluster?.close()
  })

  /**
   * Every key read back through every live node: nothing acknowledged missing, counts within bounds. On
   * a mismatch the changelog of each partition named is written beside the logs (what it holds of the keys).
   */
  async function verifyEverywhere (): Promise<void> {
    for (const member of cluster.live()) {
      const problems = await load.verify(member.url)
      if (problems.length > 0) {
        const file = join(mkdtempSync(join(tmpdir(), 'beacon-faults-changelog-')), 'changelog.txt')
        writeFileSync(file, await describeChangelog(cluster, problems))
        console.log(`      the changelog of the partitions named below: ${file}`)
      }
      expect(problems.slice(0, 20), `through ${member.id} (${problems.length} problems)`).to.deep.equal([])
    }
    const ledger = load.ledger()
    console.log(`      verified through ${cluster.live().map(member => member.id).join(', ')}: ${ledger.attributes} keys with an acknowledged attribute, ${ledger.purchases} acknowledged purchases of ${ledger.visitorsWithPurchases} visitors; reads answered 503 with Retry-After and made again: ${load.verifyRetries}`)
    load.verifyRetries = 0
  }

  /** Takes a member out of the load's rotation and waits until no request of the load is in flight to it. */
  async function takeOut (member: ClusterMember): Promise<void> {
    out.add(member.id)
    const url = member.url
    await until(`the load's requests to ${member.id} answered`, () => load.inflightTo(url) === 0, 30_000, 5)
  }

  /** No answer but 200 and 503 with Retry-After, and every request answered. */
  function expectNoUnexpected (): void {
    const { unexpected } = load.now()
    expect(unexpected.slice(0, 10), `${unexpected.length} unexpected answers`).to.deep.equal([])
  }

  function report (counts: LoadCounts): void {
    console.log(`      load: ${counts.requests} requests, ${counts.ok} answered 200, 503 with Retry-After: ${describeRetryAfter(counts)}; acknowledged ${counts.acknowledged.attributes} attribute writes, ${counts.acknowledged.purchases} purchases, ${counts.acknowledged.replays} replayed purchases`)
  }

  it(`${KILL_CYCLES} cycles of SIGKILL of a random node under load through the others: every acknowledged write present, purchase counts exact, takeover times recorded`, async () => {
    const takeoverMs: number[] = []
    const settledMs: number[] = []
    const counted: string[] = []
    load.start()
    try {
      for (let cycle = 0; cycle < KILL_CYCLES; cycle++) {
        const index = Math.floor(Math.random() * 3)
        const victim = cluster.members[index]!
        const lost = [...await cluster.settled()].filter(([, owner]) => owner === victim.id).length
        const survivors = cluster.live().filter(member => member !== victim)
        const marks = survivors.map(member => mark(member.process!))
        // Out of rotation, and its last requests answered: the load goes through the others only.
        await takeOut(victim)
        const killedAt = Date.now()
        await cluster.kill(index)
        await cluster.settled()
        settledMs.push(Date.now() - killedAt)
        // The survivors' last log lines may still be in their pipes when the cluster answers settled:
        // polled until a line per lost partition is there, for up to 2 s (fewer lines are printed, not failed).
        const takenSince = (): number[] => survivors.flatMap((member, i) => takeoversSince(member.process!, marks[i]!))
        await until('a takeover line per lost partition', () => takenSince().length >= lost, 2_000, 20).catch(() => {})
        const taken = takenSince()
        takeoverMs.push(...taken)
        counted.push(`${taken.length}/${lost}`)
        await cluster.restart(index)
        out.delete(victim.id)
        await cluster.settled()
      }
    } finally {
      report(await load.stop())
    }
    console.log(`      ${KILL_CYCLES} kills (lease ${CLUSTER_LEASE_MS} ms): the survivors owned every partition again ${summary(settledMs)} after the kill (polling /admin/cluster)`)
    console.log(`      takeovers logged by the new owners (lease seen lapsed → recovered): ${takeoverMs.length}, ${summary(takeoverMs)}; per kill (logged/lost): ${counted.join(' ')}`)
    await verifyEverywhere()
    expectNoUnexpected()
    expect(takeoverMs.length).to.be.above(0)
  })

  it('a node paused (SIGSTOP) past its lease while writes go on through the others: on SIGCONT its stale writes are refused, it rejoins, no update lost', async () => {
    const index = 1
    const member = cluster.members[index]!
    const pid = member.process!.child.pid!
    const from = mark(member.process!)
    load.start()
    let continued = false
    try {
      await sleep(500)
      await takeOut(member)
      // Paused with requests forwarded to it in flight: they are retried elsewhere by their senders.
      await pauseProcess(pid)
      const pausedAt = Date.now()
      await cluster.settled({ excluding: member.id })
      console.log(`      ${member.id} paused: its partitions owned by the others ${Date.now() - pausedAt} ms after SIGSTOP`)
      await sleep(1000)
      process.kill(pid, 'SIGCONT')
      continued = true
      const continuedAt = Date.now()
      await cluster.settled()
      out.delete(member.id)
      console.log(`      ${member.id} rejoined, the cluster settled ${Date.now() - continuedAt} ms after SIGCONT`)
      await sleep(1000)
    } finally {
      if (!continued) process.kill(pid, 'SIGCONT')
      report(await load.stop())
    }
    const lines = member.process!.output().slice(from).split('\n')
    const logged = (text: string): number => lines.filter(line => line.includes(text)).length
    console.log(`      after SIGCONT ${member.id} logged ${logged('"msg":"partition lease lost"')} leases lost and ${logged('"msg":"partition refused by its changelog')} partitions refused by their changelog (a stale append fenced)`)
    await verifyEverywhere()
    expectNoUnexpected()
    expect(logged('"msg":"partition lease lost"') + logged('"msg":"partition refused by its changelog')).to.be.above(0)
  })

  it('one NATS server (the changelog stream\'s leader) killed and restarted under load: no acknowledged write lost, only 503s with Retry-After', async () => {
    const leader = await changelogLeader(cluster)
    const server = cluster.nats.servers[leader]!
    const marks = new Map(cluster.live().map(member => [member.id, mark(member.process!)]))
    load.start()
    try {
      await sleep(1000)
      const killedAt = Date.now()
      await server.kill()
      await sleep(3000)
      await server.restart()
      await cluster.nats.waitForQuorum()
      await cluster.settled()
      console.log(`      NATS server ${cluster.nats.names[leader]} (changelog leader) killed for 3 s; the cluster settled again ${Date.now() - killedAt} ms after the kill`)
      await sleep(1000)
    } finally {
      report(await load.stop())
    }
    // A recovery whose read of the changelog skipped messages is refused (src/cluster/changelog.ts read,
    // and actors/entity-recovery.ts: a message missing before one that follows it).
    const lines = cluster.live().flatMap(member => member.process!.output().slice(marks.get(member.id) ?? 0).split('\n'))
      .filter(line => line.includes('"msg":"partition recovery failed'))
    const incomplete = lines.filter(line => / delivered \d+ of its \d+ messages/.test(line)).length
    const lacking = lines.filter(line => / lacks message \d+/.test(line)).length
    console.log(`      recoveries refused because the changelog read skipped messages: ${incomplete}; because it lacked a message a later one follows: ${lacking}`)
    await verifyEverywhere()
    expectNoUnexpected()
  })

  it('rolling SIGTERM restart of all three nodes under load: no failed request but bounded 503s with Retry-After, no acknowledged write lost', async () => {
    load.start()
    const restarts: string[] = []
    try {
      await sleep(500)
      for (let index = 0; index < 3; index++) {
        const member = cluster.members[index]!
        // Taken out of rotation first, as a load balancer would; requests in flight on it are answered.
        await takeOut(member)
        const stoppedAt = Date.now()
        expect(await cluster.stop(index), `${member.id} exit code`).to.equal(0)
        const exitedMs = Date.now() - stoppedAt
        await cluster.settled()
        await cluster.restart(index)
        out.delete(member.id)
        await cluster.settled()
        restarts.push(`${member.id} exited ${exitedMs} ms after SIGTERM, back and settled ${Date.now() - stoppedAt} ms after it`)
        await sleep(500)
      }
    } finally {
      report(await load.stop())
    }
    for (const line of restarts) console.log(`      ${line}`)
    const counts = load.now()
    console.log(`      503 with Retry-After: ${retryAfterTotal(counts)} of ${counts.requests} requests`)
    await verifyEverywhere()
    expectNoUnexpected()
  })

  it('a fourth node joining under load takes partitions, then leaves cleanly on SIGTERM: no error, nothing lost', async () => {
    load.start()
    let index = -1
    try {
      await sleep(500)
      const joinedAt = Date.now()
      index = await cluster.add('node-4')
      const owners = await cluster.settled()
      const held = [...owners.values()].filter(owner => owner === 'node-4').length
      console.log(`      node-4 settled with ${held} partitions ${Date.now() - joinedAt} ms after its start began`)
      expect(held).to.be.within(10, 16)
      await sleep(1500)
      await takeOut(cluster.members[index]!)
      expect(await cluster.stop(index)).to.equal(0)
      const owners2 = await cluster.settled()
      expect([...owners2.values()]).to.not.include('node-4')
      await sleep(500)
    } finally {
      report(await load.stop())
    }
    await verifyEverywhere()
    expectNoUnexpected()
    expect(load.now().retryAfter, 'no 503 at all during a graceful join and leave').to.deep.equal({})
  })

  it('a campaign created through node 1 (admin API) is matched through node 3 within 1 s', async () => {
    const { account } = cluster.tenant
    const [first, third] = [cluster.members[0]!, cluster.members[2]!]
    const seenMs: number[] = []
    for (let i = 0; i < 5; i++) {
      const id = `fault-campaign-${i}`
      const path = `/${randomUUID()}`
      const created = await admin(first.url, 'PUT', `/admin/accounts/${account}/campaigns/${id}`, {
        name: `Campaign ${i}`, status: 'active', priority: 1, trigger: { events: ['pageView'], paths: [path] }, content: { n: i },
      })
      expect(created.status, JSON.stringify(created.body)).to.be.oneOf([200, 201])
      const createdAt = Date.now()
      let matchedMs: number | null = null
      while (Date.now() - createdAt <= 1000) {
        const res = await post(third.url, '/campaigns/query', { account, visitorId: randomUUID(), platform: 'web', event: 'pageView', path })
        expect(res.status, JSON.stringify(res.body)).to.equal(200)
        if ((res.body.campaigns as Array<{ id: string }>).some(campaign => campaign.id === id)) {
          matchedMs = Date.now() - createdAt
          break
        }
        await sleep(10)
      }
      expect(matchedMs, `campaign ${id} matched through ${third.id} within 1 s of its creation through ${first.id}`).to.not.equal(null)
      seenMs.push(matchedMs!)
    }
    console.log(`      matched through ${third.id} ${summary(seenMs)} after the creation through ${first.id} was answered`)
  })
})

/** Where a process's output stands now. */
function mark (process: BeaconProcess): number {
  return process.output().length
}

/** takeoverMs of each "partition taken over" line the process logged after `from`. */
function takeoversSince (process: BeaconProcess, from: number): number[] {
  const found: number[] = []
  for (const line of process.output().slice(from).split('\n')) {
    if (!line.includes('"msg":"partition taken over"')) continue
    found.push((JSON.parse(line) as { takeoverMs: number }).takeoverMs)
  }
  return found
}

/**
 * The changelog of each partition named in `problems` ("… (partition N) …"), one line per message: its
 * sequence and kind, and for entries the writing node and each entry naming a key of the problems (its
 * purchases and attribute n).
 */
async function describeChangelog (cluster: BeaconCluster, problems: string[]): Promise<string> {
  const partitions = [...new Set(problems.map(problem => Number(/\(partition (\d+)\)/.exec(problem)?.[1])))].filter(Number.isInteger)
  const ids = new Set(problems.map(problem => /^\w+ (\S+)/.exec(problem)?.[1]))
  const nc = await connect({ servers: cluster.nats.urls })
  const out: string[] = [...problems, '']
  try {
    const js = jetstream(nc)
    for (const [label, stream] of [['the changelog', changelogStreamName(cluster.name)], ['its mirror (every message ever stored, purges not applied)', auditStreamName(cluster)]] as const) {
      for (const partition of partitions) {
        out.push(`partition ${partition}, ${label}:`)
        const consumer = await js.consumers.get(stream, { filter_subjects: `beacon.changelog.${cluster.name}.${partition}` })
        const messages = await consumer.fetch({ max_messages: 10_000, expires: 2000 })
        for await (const message of messages) {
          const record = decode(message.seq, message.data)
          out.push(describeRecord(record, ids))
          if (message.info.pending === 0) break
        }
      }
    }
  } catch (error) {
    out.push(`reading the changelog failed: ${String(error)}`)
  } finally {
    await nc.close()
  }
  return out.join('\n') + '\n'
}

/** One changelog message: its sequence and kind, the writing node, and the entries naming one of `ids`. */
function describeRecord (record: ChangelogRecord, ids: Set<string | undefined>): string {
  if (record.kind !== 'entries') return `  ${record.seq} ${record.kind}${record.kind === 'claim' ? ` by ${record.owner}` : ''}`
  const entries = record.entries as Array<{ t: string, i?: string, n?: string, x?: number, c?: number, s?: { purchases?: number, attributes?: { n?: unknown } } | null, e?: Array<[string, string, string, Uint8Array]> }>
  const named = entries.filter(entry => entry.t === 'e' && ids.has(entry.i)).map(entry => `${entry.i} purchases=${String(entry.s?.purchases)} n=${JSON.stringify(entry.s?.attributes?.n)}`)
  const chunked = entries.flatMap(entry => entry.t === 'c' ? entry.e!.filter(([, , id]) => ids.has(id)).map(([, , id]) => `${id} (in a chunk)`) : [])
  const kinds = entries.map(entry => entry.t === 'm' ? `m(x=${entry.x},c=${entry.c},${entry.n})` : entry.t).join('')
  return `  ${record.seq} entries ${kinds.length > 40 ? kinds.slice(0, 40) + '…' : kinds} by ${entries.find(entry => entry.n !== undefined)?.n ?? '?'}${named.length + chunked.length > 0 ? ': ' + [...named, ...chunked].join(', ') : ''}`
}

/** A mirror of the changelog stream (R1): what the changelog held before snapshots purged it. */
function auditStreamName (cluster: BeaconCluster): string {
  return `AUDIT_${cluster.name}`
}

async function startAudit (cluster: BeaconCluster): Promise<void> {
  const nc = await connect({ servers: cluster.nats.urls })
  try {
    const jsm = await jetstreamManager(nc)
    await jsm.streams.add({ name: auditStreamName(cluster), num_replicas: 1, mirror: { name: changelogStreamName(cluster.name) } })
  } finally {
    await nc.close()
  }
}

/** The index (in cluster.nats.servers) of the server leading the changelog stream. */
async function changelogLeader (cluster: BeaconCluster): Promise<number> {
  const nc = await connect({ servers: cluster.nats.urls })
  try {
    const jsm = await jetstreamManager(nc)
    const info = await jsm.streams.info(changelogStreamName(cluster.name))
    const index = cluster.nats.names.indexOf(info.cluster?.leader ?? '')
    if (index < 0) throw new Error(`no leader of the changelog stream: ${JSON.stringify(info.cluster)}`)
    return index
  } finally {
    await nc.close()
  }
}

function summary (values: number[]): string {
  if (values.length === 0) return 'none'
  const sorted = [...values].sort((a, b) => a - b)
  const median = sorted[Math.floor(sorted.length / 2)]!
  return `min ${Math.round(sorted[0]!)} ms, median ${Math.round(median)} ms, max ${Math.round(sorted[sorted.length - 1]!)} ms`
}

function sleep (ms: number): Promise<void> {
  return new Promise(resolve => setTimeout(resolve, ms))
}
