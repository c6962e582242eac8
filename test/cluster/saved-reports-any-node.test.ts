// Saved reports in cluster mode (docs/reports.md, "Cluster mode"), real processes: a 3-server NATS
// JetStream cluster (R3) and 3 Beacon nodes (test/helpers/beacon-cluster.ts). Every node's columns are
// fed from the cluster's event stream, so a report saved through one node answers the same exact result
// through every node, over events accepted by all of them; an erasure through one node leaves every
// node's result; a node restarted reads the stream again and answers the same; definitions replicate.

import { expect } from 'chai'
import { admin, post, type Answer } from '../helpers/beacon.js'
import { startBeaconCluster, visitorsOwnedBy, type BeaconCluster } from '../helpers/beacon-cluster.js'
import { expectError } from '../helpers/errors.js'
import { until } from '../helpers/until.js'
import { startReceiver, type Receiver } from '../webhooks/helpers.js'

interface Row { bucket: string, group: unknown, value: number }

describe('Beacon cluster mode: saved reports through any node (3 nodes, real processes)', function () {
  this.timeout(300_000)
  let cluster: BeaconCluster
  let receiver: Receiver
  const visitors: string[] = []

  before(async () => {
    receiver = await startReceiver()
    cluster = await startBeaconCluster(3, { BEACON_EVENT_RETENTION_DAYS: '7', BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' })
    const owners = await cluster.settled()
    for (const owner of cluster.members) {
      visitors.push(...visitorsOwnedBy(owners, account(), owner.id, 4))
    }
    // Every visitor: two pageViews (through two nodes); every other one a purchase.
    for (const [i, visitorId] of visitors.entries()) {
      for (const round of [0, 1]) expect((await send(cluster.members[(i + round) % 3]!.url, { visitorId, event: 'pageView', path: i % 2 === 0 ? '/shoes' : '/hats' })).status).to.equal(200)
      if (i % 2 === 0) expect((await send(cluster.members[(i + 2) % 3]!.url, { visitorId, event: 'purchase', orderId: `o-${i}`, orderTotal: 10 })).status).to.equal(200)
    }
  })
  after(async () => {
    await cluster?.close()
    await receiver?.close()
  })

  const account = (): string => cluster.tenant.account
  const base = (): string => `/admin/accounts/${account()}/saved-reports`

  /** A request through `url`, again on a 503 (a partition changing owner). */
  async function send (url: string, body: Record<string, unknown>): Promise<Answer> {
    for (let attempt = 1; ; attempt++) {
      const answer = await post(url, '/campaigns/query', { account: account(), platform: 'web', ...body })
      if (answer.status !== 503 || attempt === 20) return answer
      await new Promise(resolve => setTimeout(resolve, 250))
    }
  }
  /** The report's totals by group through `url`, once its columns are loaded (503 reports_loading before). */
  async function totals (url: string, id: string): Promise<Record<string, number> | null> {
    const res = await admin(url, 'GET', `${base()}/${id}/result`)
    if (res.status === 503) return null
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
    return Object.fromEntries((res.body.totals as Row[]).map(total => [String(total.group), total.value]).sort(([a], [b]) => String(a).localeCompare(String(b))))
  }
  /** Waits until every running node answers `expected` for the report. */
  async function everyNodeAnswers (id: string, expected: Record<string, number>): Promise<void> {
    let seen: unknown[] = []
    await until(`every node answering ${JSON.stringify(expected)}`, async () => {
      seen = await Promise.all(cluster.live().map(member => totals(member.url, id)))
      const wanted = JSON.stringify(Object.fromEntries(Object.entries(expected).sort(([a], [b]) => a.localeCompare(b))))
      return seen.every(one => JSON.stringify(one) === wanted)
    }, 30_000, 100).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}; answered ${JSON.stringify(seen)}`)
    })
  }

  it('answers the same exact result through every node, follows an erasure and a restart, and replicates the definitions', async () => {
    const byKind = await admin(cluster.members[0]!.url, 'POST', base(), { name: 'Visitors by kind', metric: { type: 'uniqueVisitors' }, breakdown: { by: 'kind' }, range: { lastDays: 7 }, granularity: 'day' })
    expect(byKind.status, JSON.stringify(byKind.body)).to.equal(201)
    const byPath = await admin(cluster.members[1]!.url, 'POST', base(), { name: 'Page views by path', metric: { type: 'events' }, breakdown: { by: 'path' }, filters: [{ by: 'kind', values: ['pageView'] }], range: { lastDays: 7 }, granularity: 'day' })
    expect(byPath.status, JSON.stringify(byPath.body)).to.equal(201)
    await everyNodeAnswers(byKind.body.id, { pageView: 12, purchase: 6 })
    await everyNodeAnswers(byPath.body.id, { '/shoes': 12, '/hats': 12 })
    // The definitions through any node.
    await until('both definitions listed by every node', async () => {
      const lists = await Promise.all(cluster.members.map(member => admin(member.url, 'GET', base())))
      return lists.every(list => list.status === 200 && (list.body.savedReports as unknown[]).length === 2)
    }, 10_000, 50)

    // Erasing a buyer through one node: gone from every node's result.
    const erased = await admin(cluster.members[2]!.url, 'DELETE', `/admin/accounts/${account()}/visitors/${visitors[0]!}`)
    expect(erased.status, JSON.stringify(erased.body)).to.equal(200)
    await everyNodeAnswers(byKind.body.id, { pageView: 11, purchase: 5 })
    await everyNodeAnswers(byPath.body.id, { '/shoes': 10, '/hats': 12 })

    // A node restarted reads the stream again: the same result once loaded.
    await cluster.stop(1)
    await cluster.restart(1)
    await everyNodeAnswers(byKind.body.id, { pageView: 11, purchase: 5 })

    // New events, through the restarted node too.
    expect((await send(cluster.members[1]!.url, { visitorId: visitors[1]!, event: 'purchase', orderId: 'o-late', orderTotal: 5 })).status).to.equal(200)
    await everyNodeAnswers(byKind.body.id, { pageView: 11, purchase: 6 })

    // A deletion through one node: every node answers 404 then.
    expect((await admin(cluster.members[2]!.url, 'DELETE', `${base()}/${byPath.body.id as string}`)).status).to.equal(200)
    await until('the report gone from every node', async () => {
      const answers = await Promise.all(cluster.members.map(member => admin(member.url, 'GET', `${base()}/${byPath.body.id as string}`)))
      return answers.every(answer => answer.status === 404)
    }, 10_000, 50)
    expectError(await admin(cluster.members[0]!.url, 'GET', `${base()}/${byPath.body.id as string}/result`), 'saved_report_not_found')
  })

  it('makes each run of a scheduled report once, from one node, its outcome shown through every node', async function () {
    this.timeout(180_000)
    const hook = await admin(cluster.members[0]!.url, 'PUT', `/admin/accounts/${account()}/webhooks/reports`, {
      name: 'reports', enabled: true, trigger: { kind: 'event', events: ['purchase'] },
      request: { method: 'POST', url: `${receiver.url}/reports` }, delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1 },
    })
    expect(hook.status, JSON.stringify(hook.body)).to.equal(200)
    // The next whole minute at least 5 s away (UTC): a daily run at that time of day.
    const dueMs = Math.ceil((Date.now() + 5000) / 60_000) * 60_000
    const at = new Date(dueMs).toISOString().slice(11, 16)
    let created: Answer | null = null
    await until('the report saved (the webhook replicated)', async () => {
      created = await admin(cluster.members[1]!.url, 'POST', base(), { name: 'Daily', metric: { type: 'uniqueVisitors' }, range: { lastDays: 7 }, granularity: 'day', delivery: { webhook: 'reports', every: 'day', at } })
      return created.status !== 409
    }, 10_000, 100)
    expect(created!.status, JSON.stringify(created!.body)).to.equal(201)
    const id = created!.body.id as string
    await until('the run delivered', () => receiver.requests.length > 0, 90_000, 100)
    // Every node checks the schedules each second: give the others time to have made it too, had they.
    await new Promise(resolve => setTimeout(resolve, 3000))
    expect(receiver.requests).to.have.length(1)
    expect(JSON.parse(receiver.requests[0]!.body)).to.deep.include({ id, name: 'Daily' })
    await until('the run shown through every node', async () => {
      const reads = await Promise.all(cluster.live().map(member => admin(member.url, 'GET', `${base()}/${id}`)))
      return reads.every(read => read.body.lastDelivery?.deliveryId === receiver.requests[0]!.headers['webhook-id'])
    }, 10_000, 100)
  })
})
