// Beacon in cluster mode, real processes: a 3-server NATS JetStream cluster (R3) and 3 Beacon nodes
// (test/helpers/beacon-cluster.ts). They share the 64 partitions, take a killed node's partitions over
// with every acknowledged write, hand over on SIGTERM, and refuse to start with a conflicting setting.
// Requests go to every node in turn: those for a partition another node owns are forwarded to it.
// Timings are printed, never asserted.

import { expect } from 'chai'
import { Compile } from 'typebox/schema'
import { randomUUID } from 'node:crypto'
import { connect } from '@nats-io/transport-node'
import { partitionOf } from '../../src/cluster/partition.js'
import { Changelog, changelogStreamName } from '../../src/cluster/changelog.js'
import { Store } from '../../src/store/store.js'
import { pauseProcess } from '../helpers/pause.js'
import { post, removeDir, startBeacon, tempDir } from '../helpers/beacon.js'
import { CLUSTER_LEASE_MS, CLUSTER_PARTITIONS, startBeaconCluster, takeoversOf, type BeaconCluster, type ClusterMember } from '../helpers/beacon-cluster.js'

interface Written { kind: 'visitor' | 'profile', id: string, partition: number, n: number }

describe('Beacon cluster mode (3 nodes, real processes)', function () {
  this.timeout(300_000)
  let cluster: BeaconCluster
  let owners: Map<number, string>
  const written: Written[] = []

  before(async () => {
    cluster = await startBeaconCluster(3)
    owners = await cluster.settled()
  })
  after(async () => {
    await cluster?.close()
  })

  const memberOf = (id: string): ClusterMember => {
    const member = cluster.members.find(m => m.id === id)
    if (member === undefined || member.process === null) throw new Error(`${id} is not running`)
    return member
  }

  /** The live nodes in turn: most requests reach a node that does not own their partition. */
  let turn = 0
  const nextUrl = (): string => {
    const live = cluster.live()
    return live[turn++ % live.length]!.url
  }

  async function write (kind: Written['kind'], id: string, n: number, url = nextUrl()): Promise<Written> {
    const { account, token } = cluster.tenant
    const partition = partitionOf(account, id, CLUSTER_PARTITIONS)
    const key = kind === 'visitor' ? { visitorId: id } : { profileId: id }
    const res = await post(url, kind === 'visitor' ? '/visitors/attributes' : '/profiles/attributes', { account, token, ...key, attributes: { n } })
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
    return { kind, id, partition, n }
  }

  async function read (entry: Written, url = nextUrl()): Promise<unknown> {
    const { account, token } = cluster.tenant
    const key = entry.kind === 'visitor' ? { visitorId: entry.id } : { profileId: entry.id }
    const res = await post(url, entry.kind === 'visitor' ? '/visitors/query' : '/profiles/query', { account, token, ...key })
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
    return res.body.attributes?.n?.[0]?.value
  }

  async function expectAllReadable (): Promise<void> {
    const missing: string[] = []
    for (const entry of written) {
      const n = await read(entry)
      if (n !== entry.n) missing.push(`${entry.kind} ${entry.id} (partition ${entry.partition}, owned by ${owners.get(entry.partition)}): ${String(n)}, written ${entry.n}`)
    }
    expect(missing).to.deep.equal([])
  }

  it('shares all 64 partitions: every node sees the same owners, each holds about P/N, /readyz is 200 on all', async () => {
    const answers = await Promise.all(cluster.live().map(member => cluster.status(member)))
    for (const answer of answers) {
      expect(answer).to.include({ cluster: cluster.name, partitions: CLUSTER_PARTITIONS, joined: true })
      expect(answer.unowned).to.deep.equal([])
      expect(answer.nodes.map(node => node.id)).to.deep.equal(['node-1', 'node-2', 'node-3'])
      const held = answer.nodes.map(node => node.partitions.length)
      expect(held.reduce((a, b) => a + b)).to.equal(CLUSTER_PARTITIONS)
      for (const count of held) expect(count).to.be.within(20, 22)
      expect(answer.nodes.map(node => node.partitions)).to.deep.equal(answers[0]!.nodes.map(node => node.partitions))
      for (const node of answer.nodes) for (const age of node.leaseAgesMs) expect(age).to.be.below(CLUSTER_LEASE_MS)
    }
    console.log(`      partitions held: ${answers[0]!.nodes.map(node => `${node.id} ${node.partitions.length}`).join(', ')}`)
    // As documented in the node's /openapi.json; the admin key is required.
    const member = cluster.live()[0]!
    const doc = await (await fetch(`${member.url}/openapi.json`)).json() as any
    const documented = (path: string): ReturnType<typeof Compile> => Compile({ ...doc.paths[path].get.responses['200'].content['application/json'].schema, components: doc.components })
    expect(documented('/admin/cluster').Check(answers[0]), 'GET /admin/cluster as documented').to.equal(true)
    expect((await fetch(`${member.url}/admin/cluster`)).status).to.equal(401)
    for (const member of cluster.live()) {
      const ready = await fetch(`${member.url}/readyz`)
      const body = await ready.json() as { checks: Array<{ name: string, ok: boolean }> }
      expect(ready.status, member.id).to.equal(200)
      expect(body.checks.find(check => check.name === 'cluster')).to.include({ ok: true })
      expect(documented('/readyz').Check(body), 'GET /readyz as documented').to.equal(true)
    }
  })

  it('acknowledges writes sent to any node (forwarded to the owner) and reads them back through every node', async () => {
    for (let i = 0; i < 300; i++) written.push(await write('visitor', randomUUID(), i))
    for (let i = 0; i < 60; i++) written.push(await write('profile', `person-${i}@example.com`, 1000 + i))
    expect(new Set(written.map(entry => entry.partition)).size).to.be.above(50)
    await expectAllReadable()
    // Each owner counts the entries its partitions' changelogs took since their last snapshot.
    const entries = (await Promise.all(cluster.live().map(member => cluster.status(member)))).flatMap(answer => answer.changelogEntries)
    expect(entries.reduce((a, b) => a + b)).to.be.at.least(written.length)
    // Through a node that does not own the partition: forwarded, and the same answer through every node.
    const entry = written.find(candidate => candidate.kind === 'visitor')!
    const other = cluster.live().find(member => member.id !== owners.get(entry.partition))!
    Object.assign(entry, await write('visitor', entry.id, -1, other.url))
    for (const member of cluster.live()) expect(await read(entry, member.url), member.id).to.equal(-1)
    const { account, token } = cluster.tenant
    const answers = await Promise.all(cluster.live().map(member => post(member.url, '/visitors/query', { account, token, visitorId: entry.id })))
    for (const answer of answers) expect(answer.body).to.deep.equal(answers[0]!.body)
    const forwarded = await Promise.all(cluster.live().map(async member => await (await fetch(`${member.url}/metrics`)).text()))
    const count = (text: string): number => Number(/^beacon_cluster_forwarded_total (\d+)/m.exec(text)?.[1] ?? 0)
    expect(forwarded.map(count).reduce((a, b) => a + b)).to.be.above(written.length / 2)
    // Sent in batches (BEACON_FORWARD_BATCH, on by default), each batch one NATS message, counted.
    const batches = (text: string): number => Number(/^beacon_cluster_forward_batches_total (\d+)/m.exec(text)?.[1] ?? 0)
    expect(forwarded.map(batches).reduce((a, b) => a + b)).to.be.at.least(1)
  })

  it('a write fenced by another claim on its changelog: refused there, the owner gives the lease up, the write is retried at the next owner, the partition is recovered with its writes', async () => {
    const nc = await connect({ servers: cluster.nats.urls })
    try {
      const intruder = await Changelog.open({ nc, stream: changelogStreamName(cluster.name), subjectPrefix: `beacon.changelog.${cluster.name}`, replicas: 3, owner: 'intruder' })
      const entry = written.find(candidate => candidate.kind === 'visitor')!
      const owner = memberOf(owners.get(entry.partition)!)
      await intruder.claim(entry.partition)
      const { account, token } = cluster.tenant
      // Refused by the changelog at the owner, then retried at the partition's next owner (the same node
      // may take it again, after recovering it): the client gets that answer.
      const retried = await post(owner.url, '/visitors/attributes', { account, token, visitorId: entry.id, attributes: { n: -7 } })
      expect(retried.status, JSON.stringify(retried.body)).to.equal(200)
      entry.n = -7
      owners = await cluster.settled()
      // The refusal's line names the partition and carries the append's error.
      expect(owner.process!.output()).to.match(new RegExp(`"partition":${entry.partition},"err":\\{.*"msg":"partition refused by its changelog`))
      console.log(`      partition ${entry.partition} refused at ${owner.id}, owned again by ${owners.get(entry.partition)}`)
      await expectAllReadable()
    } finally {
      await nc.close()
    }
  })

  it('SIGKILL of a node: the others take its partitions over, with every acknowledged write', async () => {
    const victim = 2
    const victimId = cluster.members[victim]!.id
    // What the victim serves the moment before the kill (the last settled view may be older).
    const lost = (await cluster.status(cluster.members[victim]!)).owned
    const survivors = cluster.live().filter(member => member.id !== victimId)
    const before = await Promise.all(survivors.map(takeoversOf))
    const killedAt = Date.now()
    await cluster.kill(victim)
    owners = await cluster.settled()
    const tookMs = Date.now() - killedAt
    for (const partition of lost) expect(owners.get(partition)).to.not.equal(victimId)
    const after = await Promise.all(survivors.map(takeoversOf))
    try {
      const count = after.reduce((total, t, i) => total + t.count - before[i]!.count, 0)
      const sumMs = after.reduce((total, t, i) => total + (t.sum - before[i]!.sum) * 1000, 0)
      console.log(`      ${lost.length} partitions of ${victimId} owned by the survivors ${tookMs} ms after SIGKILL (lease ${CLUSTER_LEASE_MS} ms, seen by polling /admin/cluster)`)
      console.log(`      takeover as the new owners measured it (lease seen lapsed → recovered): mean ${Math.round(sumMs / count)} ms over ${count} of the ${lost.length} partitions`)
      // Counted when the new owner had seen the lease it replaces: not always all of them (12 of 22 in a
      // clean-clone CI run on 2026-11-26, after the refused-acquire fix; docs/internals/cluster.md "What is still to do").
      expect(count).to.be.within(1, lost.length)
      await expectAllReadable()
      for (let i = 0; i < 30; i++) written.push(await write('visitor', randomUUID(), 2000 + i))
    } finally {
      // Back on its data folder: it rejoins, the others hand partitions over, and it recovers them. Also
      // after a failed check, so that the next tests have their three nodes.
      const restartedAt = Date.now()
      await cluster.restart(victim)
      owners = await cluster.settled()
      console.log(`      ${victimId} restarted and settled with ${[...owners.values()].filter(owner => owner === victimId).length} partitions in ${Date.now() - restartedAt} ms`)
    }
    await expectAllReadable()
  })

  it('SIGTERM of a node: it hands its partitions over gracefully, with every acknowledged write', async () => {
    const index = 1
    const id = cluster.members[index]!.id
    for (let i = 0; i < 30; i++) written.push(await write('visitor', randomUUID(), 3000 + i))
    const stoppedAt = Date.now()
    const code = await cluster.stop(index)
    const exitedMs = Date.now() - stoppedAt
    try {
      expect(code).to.equal(0)
      owners = await cluster.settled()
      console.log(`      ${id} exited ${exitedMs} ms after SIGTERM; its partitions owned by the others ${Date.now() - stoppedAt} ms after it`)
      expect([...owners.values()]).to.not.include(id)
      await expectAllReadable()
    } finally {
      // Also after a failed check: the next tests need their three nodes.
      await cluster.restart(index)
      owners = await cluster.settled()
    }
    await expectAllReadable()
  })

  it('SIGSTOP past the lease: the others take its partitions, a write to it after SIGCONT lands at the new owner, it rejoins, no update lost', async () => {
    const index = 0
    const member = cluster.members[index]!
    const pid = member.process!.child.pid!
    const at = written.findIndex(entry => entry.kind === 'visitor' && owners.get(entry.partition) === member.id)
    const entry = written[at]!
    await pauseProcess(pid)
    const pausedAt = Date.now()
    try {
      owners = await cluster.settled({ excluding: member.id })
      console.log(`      ${member.id} paused: its partitions owned by the others ${Date.now() - pausedAt} ms after SIGSTOP`)
      // Through the running nodes (a request to the stopped one would wait for SIGCONT).
      const running = cluster.live().filter(other => other !== member)
      written[at] = await write('visitor', entry.id, 5000, running[0]!.url)
      for (let i = 0; i < 30; i++) written.push(await write('visitor', randomUUID(), 5001 + i, running[i % running.length]!.url))
    } finally {
      process.kill(pid, 'SIGCONT')
    }
    // A write sent to the woken node the moment it continues: it no longer owns the partition (its lease
    // lapsed: it forwards), or it still believes it does and its changelog refuses the append (fenced):
    // either way the write is not applied there but at the new owner, and the client gets that answer.
    const { account, token } = cluster.tenant
    const late = await post(member.url, '/visitors/attributes', { account, token, visitorId: entry.id, attributes: { n: -5 } })
    expect(late.status, JSON.stringify(late.body)).to.equal(200)
    written[at] = { ...entry, n: -5 }
    const continuedAt = Date.now()
    owners = await cluster.settled()
    const log = member.process!.output()
    const count = (text: string): number => log.split('\n').filter(line => line.includes(text)).length
    console.log(`      ${member.id} rejoined and the cluster settled ${Date.now() - continuedAt} ms after SIGCONT; it logged ${count('"partition lease lost"')} leases lost, ${count('"partition refused by its changelog')} partitions refused by their changelog`)
    expect([...owners.values()]).to.include(member.id)
    await expectAllReadable()
  })

  it('a fourth node, named by its data folder, takes its share, then leaves on SIGTERM, with every write kept', async () => {
    const joinedAt = Date.now()
    const index = await cluster.add(null)
    const fourth = cluster.members[index]!
    expect(fourth.id).to.match(/^[0-9a-f-]{36}$/)
    // Its share is 16 of 64 with four nodes running (three, and a share of 22, if a test before left one down).
    expect(cluster.live().map(member => member.id)).to.have.length(4)
    owners = await cluster.settled()
    const held = [...owners.values()].filter(owner => owner === fourth.id).length
    console.log(`      a fourth node settled with ${held} partitions ${Date.now() - joinedAt} ms after its start began`)
    expect(held).to.be.within(10, 16)
    await expectAllReadable()
    for (let i = 0; i < 30; i++) written.push(await write('visitor', randomUUID(), 4000 + i))
    expect(await cluster.stop(index)).to.equal(0)
    owners = await cluster.settled()
    expect([...owners.values()]).to.not.include(fourth.id)
    await expectAllReadable()
    // The data folder's node id, as the store keeps it.
    const store = new Store({ path: fourth.dataDir, durability: 'committed' })
    expect(store.nodeId).to.equal(fourth.id)
    await store.close()
  })

  it('counts takeovers and changelog appends in /metrics', async () => {
    const text = await (await fetch(`${cluster.live()[0]!.url}/metrics`)).text()
    for (const name of ['beacon_cluster_takeovers_total', 'beacon_cluster_takeover_seconds_count', 'beacon_cluster_changelog_append_seconds_count', 'beacon_cluster_partitions_owned', 'beacon_cluster_forwarded_total', 'beacon_cluster_forward_batches_total']) {
      expect(text).to.match(new RegExp(`^${name} `, 'm'))
    }
    const owned = Number(/^beacon_cluster_partitions_owned (\d+)/m.exec(text)![1])
    expect(owned).to.be.within(20, 22)
  })

  describe('refusals at start', () => {
    const refusal = async (env: Record<string, string>, dir?: string): Promise<string> => {
      const dataDir = dir ?? await cluster.seededDir()
      try {
        const started = await startBeacon({ dataDir, env })
        await started.kill()
        throw new Error('it started')
      } catch (error) {
        return (error as Error).message
      } finally {
        removeDir(dataDir)
      }
    }

    it('another BEACON_PARTITIONS than the cluster was created with', async () => {
      const output = await refusal(cluster.env('node-9', { BEACON_PARTITIONS: '32' }))
      expect(output).to.include(`beacon: failed to start: the cluster ${cluster.name} was created with 64 partitions; this node has BEACON_PARTITIONS=32`)
    })

    it('the id of a live node', async () => {
      const output = await refusal(cluster.env('node-1'))
      expect(output).to.include('beacon: failed to start: another live node of this cluster has the node id node-1 (BEACON_NODE_ID): each node needs its own')
    })

    it('cluster mode without a NATS URL or without an admin key', async () => {
      const withoutNats = await refusal({ BEACON_CLUSTER: 'lonely', BEACON_NATS_URL: '' }, tempDir())
      expect(withoutNats).to.include('BEACON_CLUSTER: cluster mode needs BEACON_NATS_URL')
      const withoutKey = await refusal({ BEACON_CLUSTER: 'lonely', BEACON_NATS_URL: cluster.nats.urls[0]!, BEACON_ADMIN_KEY: '' }, tempDir())
      expect(withoutKey).to.include('BEACON_CLUSTER: cluster mode needs BEACON_ADMIN_KEY')
    })
  })
})
