// Bulk imports in cluster mode (docs/events.md, "Bulk import"), real processes: a 3-server NATS
// JetStream cluster (R3) and 3 Beacon nodes (test/helpers/beacon-cluster.ts). An NDJSON file uploaded to
// one node is applied there, each row at the owner of its visitor's or profile's partition (every
// node's partitions in the file); the job is read and listed through any node; the same file imported
// again through another node counts every row as a duplicate (the claim's answer comes back across
// nodes), and changes nothing.

import { expect } from 'chai'
import { ADMIN_KEY, admin, post } from '../helpers/beacon.js'
import { startBeaconCluster, visitorsOwnedBy, type BeaconCluster } from '../helpers/beacon-cluster.js'
import { expectError } from '../helpers/errors.js'
import { until } from '../helpers/until.js'

const DAY_MS = 86_400_000

interface Job { id: string, state: string, rowsRead: number, applied: number, duplicates: number, refused: number, refusals: Array<{ line: number, code: string }> }

describe('Beacon cluster mode: bulk imports through any node (3 nodes, real processes)', function () {
  this.timeout(300_000)
  let cluster: BeaconCluster
  let owners = new Map<number, string>()

  before(async () => {
    cluster = await startBeaconCluster(3)
    owners = await cluster.settled()
    for (const [id, rule] of [['recent-buyers', { fact: 'count', event: 'purchase', within: '30d', op: 'gte', value: 1 }], ['buyers', { fact: 'count', event: 'purchase', op: 'gte', value: 1 }]] as const) {
      const put = await admin(cluster.members[0]!.url, 'PUT', `/admin/accounts/${account()}/segments/${id}`, { rule })
      expect(put.status, JSON.stringify(put.body)).to.be.oneOf([200, 201])
    }
  })
  after(async () => {
    await cluster?.close()
  })

  const account = (): string => cluster.tenant.account
  const visitorsOf = (member: string, count: number): string[] => visitorsOwnedBy(owners, account(), member, count)
  async function upload (url: string, body: string): Promise<{ status: number, body: any }> {
    const res = await fetch(`${url}/admin/accounts/${account()}/imports`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/x-ndjson' }, body })
    return { status: res.status, body: await res.json() }
  }
  async function finished (url: string, id: string): Promise<Job> {
    let job: Job | null = null
    await until('the import to finish', async () => {
      const res = await admin(url, 'GET', `/admin/accounts/${account()}/imports/${id}`)
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
      job = res.body as Job
      return job.state === 'done' || job.state === 'failed'
    }, 120_000, 50)
    return job!
  }
  async function segmentsOf (url: string, visitorId: string): Promise<string[]> {
    const res = await post(url, '/visitors/query', { account: account(), visitorId, token: cluster.tenant.token })
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
    return res.body.segments as string[]
  }

  it('applies every row at its partition\'s owner from the node that took the file, read through any node; the same file again is all duplicates', async () => {
    const nowMs = Date.now()
    const recent = cluster.members.flatMap(member => visitorsOf(member.id, 3))
    const old = cluster.members.flatMap(member => visitorsOf(member.id, 1))
    const rows: unknown[] = [
      { type: 'profile', profileId: 'ada', attributes: { plan: 'pro' } },
      { type: 'link', visitorId: recent[0], profileId: 'ada' },
      ...recent.map((visitorId, i) => ({ type: 'visitor', visitorId, attributes: { source: 'crm', n: i } })),
      ...recent.map((visitorId, i) => ({ type: 'event', visitorId, platform: 'web', event: 'purchase', orderId: `o-${i}`, orderTotal: 10, timestamp: new Date(nowMs - 2 * DAY_MS).toISOString(), messageId: `m-${i}` })),
      ...old.map((visitorId, i) => ({ type: 'event', visitorId, platform: 'web', event: 'purchase', orderId: `old-${i}`, orderTotal: 5, timestamp: new Date(nowMs - 40 * DAY_MS).toISOString() })),
      'not json',
    ]
    const file = rows.map(row => typeof row === 'string' ? row : JSON.stringify(row)).join('\n') + '\n'
    const applied = rows.length - 1

    const created = await upload(cluster.members[0]!.url, file)
    expect(created.status, JSON.stringify(created.body)).to.equal(202)
    expect((created.body.id as string).startsWith(`${cluster.members[0]!.id}:`), created.body.id).to.equal(true)
    const job = await finished(cluster.members[1]!.url, created.body.id)
    expect(job).to.deep.include({ state: 'done', rowsRead: rows.length, applied, duplicates: 0, refused: 1 })
    expect(job.refusals.map(r => [r.line, r.code])).to.deep.equal([[rows.length, 'invalid_json']])

    // Each visitor's state at its owner, read through another node.
    for (const [i, visitorId] of recent.entries()) expect(await segmentsOf(cluster.members[(i + 1) % 3]!.url, visitorId), visitorId).to.include.members(['buyers', 'recent-buyers'])
    for (const visitorId of old) expect(await segmentsOf(cluster.members[2]!.url, visitorId), visitorId).to.include('buyers').and.not.include('recent-buyers')
    const profile = await admin(cluster.members[2]!.url, 'GET', `/admin/accounts/${account()}/profiles/ada`)
    expect(profile.status, JSON.stringify(profile.body)).to.equal(200)
    expect(JSON.stringify(profile.body)).to.include('"plan":"pro"')

    // The same file through another node: every row a duplicate, nothing applied twice.
    const again = await upload(cluster.members[2]!.url, file)
    expect(again.status, JSON.stringify(again.body)).to.equal(202)
    const second = await finished(cluster.members[0]!.url, again.body.id)
    expect(second).to.deep.include({ state: 'done', applied: 1, duplicates: applied - 1, refused: 1 })
    const list = await admin(cluster.members[1]!.url, 'GET', `/admin/accounts/${account()}/imports`)
    expect(list.status).to.equal(200)
    expect((list.body.imports as Job[]).map(one => one.id)).to.deep.equal([again.body.id, created.body.id])

    expectError(await admin(cluster.members[1]!.url, 'GET', `/admin/accounts/${account()}/imports/${cluster.members[0]!.id}:00000000-0000-4000-8000-000000000000`), 'import_not_found')
    expectError(await admin(cluster.members[1]!.url, 'GET', `/admin/accounts/${account()}/imports/nope`), 'import_not_found')
  })
})
