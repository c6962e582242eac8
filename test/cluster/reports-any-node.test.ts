// Reports, segment member counts and the audit log from any node, real processes: a 3-server NATS
// JetStream cluster (R3) and 3 Beacon nodes (test/helpers/beacon-cluster.ts) folding their report
// counts only at stop (BEACON_REPORT_FOLD_MS one hour). Campaigns and segments created through all
// three nodes are listed in the audit log through every node, each once, a small page at a time. Events
// of many visitors (spread over the partitions, so counted by all three nodes) sent through all three:
// the report through each node has the exact event and impression counts of the whole cluster, counts
// not folded included, and the unique-visitor estimate of one sketch of all the visitors; a manual
// segment's member count through each node is the cluster's. Then node 3 stops (folding its counts),
// members it counted in leave the segment while the others own its partitions (their exits counted
// there), node 3 comes back and takes its partitions back (recovery replays their changelog), the other
// two restart (folding their shares, below zero): the counts stay exact.
// A paused node makes each of these reads a 503 with Retry-After. Timings are printed, never asserted.

import { expect } from 'chai'
import { admin, post, visitorId } from '../helpers/beacon.js'
import { startBeaconCluster, type BeaconCluster } from '../helpers/beacon-cluster.js'
import { pauseProcess } from '../helpers/pause.js'
import { until } from '../helpers/until.js'
import { HyperLogLog } from '../../src/reports/hll.js'
import { partitionOf } from '../../src/cluster/partition.js'
import { CLUSTER_PARTITIONS } from '../helpers/beacon-cluster.js'

const HOUR_MS = 3_600_000

interface Row { t: string, events: Record<string, number>, visitors: number, campaigns: Record<string, { impressions: number }> }
interface Entry { id: string, at: string, entity: string, entityId: string }

describe('Beacon cluster mode: reports and the audit log from any node (3 nodes, real processes)', function () {
  this.timeout(300_000)
  let cluster: BeaconCluster
  const visitors = Array.from({ length: 240 }, () => visitorId())
  /** Partition → owner id once the cluster settled at its start. */
  let owners: Map<number, string>

  before(async () => {
    // Nothing is folded while the test runs but at a node's stop: the reports must include what is in memory.
    cluster = await startBeaconCluster(3, { BEACON_REPORT_FOLD_MS: '3600000' })
    owners = await cluster.settled()
  })
  after(async () => {
    await cluster?.close()
  })

  const urlOf = (i: number): string => cluster.live()[i % cluster.live().length]!.url
  const account = (): string => cluster.tenant.account
  const base = (): string => `/admin/accounts/${account()}`

  /** Every entry of the audit log through `url`, following `next` with pages of `limit`. */
  const auditAll = async (url: string, limit: number): Promise<{ entries: Entry[], pages: number }> => {
    const entries: Entry[] = []
    let cursor: string | null = ''
    let pages = 0
    while (cursor !== null) {
      const res = await admin(url, 'GET', `${base()}/audit?limit=${limit}${cursor === '' ? '' : `&cursor=${encodeURIComponent(cursor)}`}`)
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
      expect(res.body.entries.length).to.be.at.most(limit)
      entries.push(...res.body.entries as Entry[])
      cursor = res.body.next as string | null
      expect(++pages, 'pages').to.be.below(1000)
    }
    return { entries, pages }
  }

  /** The report's rows through `url`: the hour before now to the hour after, per hour. */
  const report = async (url: string): Promise<Row[]> => {
    const nowMs = Date.now()
    const res = await admin(url, 'GET', `${base()}/reports?granularity=hour&from=${new Date(nowMs - HOUR_MS).toISOString()}&to=${new Date(nowMs + HOUR_MS).toISOString()}`)
    expect(res.status, JSON.stringify(res.body).slice(0, 300)).to.equal(200)
    return res.body.rows as Row[]
  }
  const total = (rows: Row[], pick: (row: Row) => number | undefined): number => rows.reduce((sum, row) => sum + (pick(row) ?? 0), 0)
  const members = async (url: string): Promise<number> => {
    const res = await admin(url, 'GET', `${base()}/segments/vip`)
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
    return res.body.members as number
  }

  /** `count` requests made by `send(i)`, 16 at a time. */
  const sendAll = async (count: number, send: (i: number) => Promise<{ status: number, body: unknown }>): Promise<void> => {
    for (let from = 0; from < count; from += 16) {
      const answers = await Promise.all(Array.from({ length: Math.min(16, count - from) }, (_, j) => send(from + j)))
      for (const answer of answers) expect(answer.status, JSON.stringify(answer.body)).to.equal(200)
    }
  }
  const pageView = (visitor: string, via: number): Promise<{ status: number, body: unknown }> =>
    post(urlOf(via), '/campaigns/query', { account: account(), visitorId: visitor, platform: 'web', event: 'pageView' })
  const vip = (visitor: string, via: number, change: 'assignees' | 'removes'): Promise<{ status: number, body: unknown }> =>
    post(urlOf(via), '/visitors/segments', { account: account(), token: cluster.tenant.token, visitorId: visitor, [change]: ['vip'] })

  it('lists the changes made through every node in the audit log through every node, each once, newest first, a page at a time', async () => {
    const created: string[] = []
    for (let i = 0; i < 9; i++) {
      // The report's campaign and segment among them: `sale` through node 1, `vip` through node 2.
      const [path, body] = i === 0
        ? ['campaigns/sale', { name: 'Sale', status: 'active', priority: 1, trigger: { events: ['pageView'] }, content: { html: 'x' } }]
        : i === 1
          ? ['segments/vip', { description: 'Manual' }]
          : i % 2 === 0
            ? [`campaigns/c${i}`, { name: `C${i}`, status: 'paused', priority: 1, trigger: { events: ['purchase'] }, content: {} }]
            : [`segments/s${i}`, { rule: { fact: 'count', event: 'purchase', op: 'gte', value: i } }]
      const res = await admin(urlOf(i), 'PUT', `${base()}/${path}`, body)
      expect(res.status, JSON.stringify(res.body)).to.be.oneOf([200, 201])
      created.push(path.split('/')[1]!)
    }
    for (const member of cluster.live()) {
      await until(`the configuration on ${member.id}`, async () => (await admin(member.url, 'GET', `${base()}/segments/s7`)).status === 200, 5_000, 10)
    }
    let listedIds: string[] | null = null
    for (const member of cluster.live()) {
      const startedMs = Date.now()
      const { entries, pages } = await auditAll(member.url, 2)
      const ours = entries.filter(entry => created.includes(entry.entityId))
      console.log(`      through ${member.id}: ${entries.length} entries (${ours.length} of this test) in ${pages} pages of 2, ${Date.now() - startedMs} ms`)
      expect(ours.map(entry => entry.entityId).sort(), `${member.id}: each change once`).to.deep.equal([...created].sort())
      expect(new Set(ours.map(entry => entry.id.split(':')[0])).size, `${member.id}: entries of all three nodes`).to.equal(3)
      const ids = entries.map(entry => entry.id)
      expect(new Set(ids).size, `${member.id}: no entry twice`).to.equal(ids.length)
      const times = entries.map(entry => entry.at)
      expect(times, `${member.id}: newest first`).to.deep.equal([...times].sort().reverse())
      expect(ids, `${member.id}: the same listing as the others`).to.deep.equal(listedIds ??= ids)
    }
    const wrong = await admin(urlOf(0), 'GET', `${base()}/audit?cursor=${encodeURIComponent('not a cursor')}`)
    expect(wrong.status).to.equal(400)
    expect(wrong.body.errors[0]).to.include({ code: 'invalid_field', field: '/cursor' })
  })

  it('answers the report and member counts of the whole cluster through every node, counts not folded included, and still after nodes left and came back', async () => {
    const startedMs = Date.now()
    // VIPs: the visitors of node-3's partitions, so that node-3 counts every enter.
    const vips = visitors.filter(v => owners.get(partitionOf(account(), v, CLUSTER_PARTITIONS)) === 'node-3')
    // Two page views a visitor, through two different nodes.
    await sendAll(visitors.length * 2, i => pageView(visitors[i >> 1]!, i))
    await sendAll(vips.length, i => vip(vips[i]!, i, 'assignees'))
    console.log(`      ${visitors.length * 2} page views and ${vips.length} segment changes sent in ${Date.now() - startedMs} ms`)
    const sketch = new HyperLogLog()
    for (const v of visitors) sketch.add(v)
    const expectExact = async (pageViews: number, vipCount: number, when: string): Promise<void> => {
      for (const member of cluster.live()) {
        const readMs = Date.now()
        const rows = await report(member.url)
        const tookMs = Date.now() - readMs
        const counted = rows.filter(row => row.events.pageView !== undefined)
        expect(total(rows, row => row.events.pageView), `${member.id} ${when}: page views`).to.equal(pageViews)
        expect(total(rows, row => row.campaigns.sale?.impressions), `${member.id} ${when}: impressions`).to.equal(pageViews)
        // One hour's row (unless the test ran across the hour): the merged sketch is the one of all the visitors.
        if (counted.length === 1) expect(counted[0]!.visitors, `${member.id} ${when}: unique visitors`).to.equal(sketch.estimate())
        expect(Math.abs(Math.max(...counted.map(row => row.visitors)) - visitors.length), `${member.id} ${when}: within HLL error`).to.be.at.most(visitors.length * 0.07)
        expect(await members(member.url), `${member.id} ${when}: VIP members`).to.equal(vipCount)
        console.log(`      ${when}, through ${member.id}: ${pageViews} page views, ${counted.map(row => row.visitors).join('+')} visitors (true ${visitors.length}), ${vipCount} VIPs; report in ${tookMs} ms`)
      }
    }
    await expectExact(visitors.length * 2, vips.length, 'nothing folded')

    // Node-3 leaves (its counts folded at stop): its partitions move to the others, which count the exits
    // of VIPs it counted in (their shares go below zero), and more page views.
    expect(await cluster.stop(2)).to.equal(0)
    await cluster.settled()
    const leaving = vips.slice(0, vips.length >> 1)
    await sendAll(leaving.length, i => vip(leaving[i]!, i, 'removes'))
    await sendAll(60, i => pageView(visitors[i]!, i))
    const partial = total(await report(urlOf(0)), row => row.events.pageView)
    console.log(`      node-3 away: ${partial} page views of ${visitors.length * 2 + 60} through node-1 (node-3's share comes back with it)`)
    // Node-3 back: it takes its share of partitions back (recovered from their changelog).
    await cluster.restart(2)
    const backMs = Date.now()
    await cluster.settled()
    console.log(`      node-3 back, its partitions recovered ${Date.now() - backMs} ms after its start`)
    await expectExact(visitors.length * 2 + 60, vips.length - leaving.length, 'after node-3 left and came back')
    // Node-1 and node-2 restarted one after the other: their shares (below zero) folded at stop, read from their stores.
    for (const index of [0, 1]) {
      expect(await cluster.stop(index)).to.equal(0)
      await cluster.restart(index)
    }
    await cluster.settled()
    await expectExact(visitors.length * 2 + 60, vips.length - leaving.length, 'after node-1 and node-2 restarted')
  })

  it('answers 503 unavailable with Retry-After when a node does not answer, never a partial answer', async () => {
    const paused = cluster.members[1]!
    const pid = paused.process!.child.pid!
    await pauseProcess(pid)
    try {
      // All four at once: each waits for the paused node's answer as long as the call's budget (5 s).
      await Promise.all(['/reports?granularity=day', '/audit?limit=5', '/segments/vip', '/segments'].map(async path => {
        const startedMs = Date.now()
        const res = await admin(urlOf(0), 'GET', `${base()}${path}`)
        console.log(`      ${paused.id} paused: ${path} ${res.status} after ${Date.now() - startedMs} ms`)
        expect(res.status, `${path}: ${JSON.stringify(res.body).slice(0, 300)}`).to.equal(503)
        expect(res.body.errors[0].code).to.equal('unavailable')
        expect(res.headers.get('retry-after')).to.equal('1')
      }))
    } finally {
      process.kill(pid, 'SIGCONT')
    }
  })
})
