import { expect } from 'chai'
import { connect } from 'node:net'
import { admin, discardBeacon, post, removeDir, startBeacon, startWithTenant, visitorId, type BeaconProcess, type Tenant } from '../helpers/beacon.js'
import { until } from '../helpers/until.js'
import { Metrics, type RuntimeStats, type StoreStats } from '../../src/ops/metrics.js'
import { startInProcess } from '../helpers/in-process.js'
import { settingsOf } from '../../src/start.js'
import { loadConfig } from '../../src/config.js'
import { UNMATCHED } from '../../src/http/server.js'

/** The value of one sample line, e.g. sample(text, 'beacon_http_requests_total{route="/x",method="GET",status="200"}'). */
function sample (text: string, series: string): number | undefined {
  const line = text.split('\n').find(l => l.startsWith(series + ' '))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}

async function scrape (base: string): Promise<{ status: number, type: string | null, text: string }> {
  const res = await fetch(base + '/metrics')
  return { status: res.status, type: res.headers.get('content-type'), text: await res.text() }
}

const event = (tenant: Tenant, id = visitorId()): Record<string, unknown> => ({ account: tenant.account, visitorId: id, platform: 'web', event: 'pageView' })

describe('GET /metrics', () => {
  let beacon: BeaconProcess
  let tenant: Tenant

  before(async () => { ({ beacon, tenant } = await startWithTenant()) })

  after(() => discardBeacon(beacon))

  it('answers the Prometheus text format with process metrics', async () => {
    const { status, type, text } = await scrape(beacon.url)
    expect(status).to.equal(200)
    expect(type).to.equal('text/plain; version=0.0.4; charset=utf-8')
    expect(text).to.include('# TYPE beacon_http_requests_total counter')
    expect(text).to.include('# TYPE beacon_http_request_duration_seconds histogram')
    expect(text).to.match(/^process_cpu_seconds_total \d/m)
    expect(text).to.match(/^nodejs_eventloop_lag_seconds \d/m)
  })

  it('counts requests by route pattern, method and status, and times them', async () => {
    for (let i = 0; i < 3; i++) expect((await post(beacon.url, '/campaigns/query', event(tenant))).status).to.equal(200)
    expect((await post(beacon.url, '/campaigns/query', { ...event(tenant), event: 'nope' })).status).to.equal(400)
    expect((await fetch(beacon.url + '/no/such/path')).status).to.equal(404)
    expect((await fetch(beacon.url + '/campaigns/query')).status).to.equal(405)
    expect((await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}`)).status).to.equal(200)
    const { text } = await scrape(beacon.url)
    expect(sample(text, 'beacon_http_requests_total{route="/campaigns/query",method="POST",status="200"}')).to.equal(3)
    expect(sample(text, 'beacon_http_requests_total{route="/campaigns/query",method="POST",status="400"}')).to.equal(1)
    expect(sample(text, 'beacon_http_requests_total{route="(unmatched)",method="other",status="404"}')).to.equal(1)
    expect(sample(text, 'beacon_http_requests_total{route="/campaigns/query",method="other",status="405"}')).to.equal(1)
    // Route patterns, never URLs: the account id stays out of the labels.
    expect(sample(text, 'beacon_http_requests_total{route="/admin/accounts/:account",method="GET",status="200"}')).to.equal(1)
    expect(text).not.to.include(tenant.account)
    expect(sample(text, 'beacon_http_request_duration_seconds_count{route="/campaigns/query",method="POST"}')).to.equal(4)
    expect(sample(text, 'beacon_http_request_duration_seconds_sum{route="/campaigns/query",method="POST"}')).to.be.greaterThan(0)
    expect(sample(text, 'beacon_http_request_duration_seconds_bucket{le="+Inf",route="/campaigns/query",method="POST"}')).to.equal(4)
  })

  it('counts a request whose client went away before the answer as 499', async () => {
    const socket = connect(beacon.port, '127.0.0.1')
    await new Promise(resolve => socket.once('connect', resolve))
    socket.write('POST /visitors/attributes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"acc')
    await new Promise(resolve => setTimeout(resolve, 50))
    socket.destroy()
    let count: number | undefined
    await until('the aborted request counted', async () => {
      count = sample((await scrape(beacon.url)).text, 'beacon_http_requests_total{route="/visitors/attributes",method="POST",status="499"}')
      return count !== undefined
    }, 2000, 20)
    expect(count).to.equal(1)
  })

  it('reports actors, LMDB and the outbox', async () => {
    for (let i = 0; i < 5; i++) await post(beacon.url, '/campaigns/query', event(tenant))
    const { text } = await scrape(beacon.url)
    expect(sample(text, 'beacon_actors_resident')).to.be.at.least(5)
    expect(sample(text, 'beacon_actor_activations_total')).to.be.at.least(5)
    expect(sample(text, 'beacon_actor_passivations_total')).to.be.a('number')
    expect(sample(text, 'beacon_lmdb_entries{db="visitors"}')).to.be.at.least(5)
    expect(sample(text, 'beacon_lmdb_map_size_bytes')).to.be.greaterThan(0)
    expect(sample(text, 'beacon_lmdb_used_bytes')).to.be.greaterThan(0)
    expect(sample(text, 'beacon_lmdb_file_bytes')).to.be.greaterThan(0)
    expect(sample(text, 'beacon_outbox_rows')).to.equal(0)
    // Counters mirrored from the runtime only go up between scrapes.
    const again = await scrape(beacon.url)
    expect(sample(again.text, 'beacon_actor_activations_total')).to.be.at.least(sample(text, 'beacon_actor_activations_total')!)
  })
})

describe('BEACON_METRICS=false', () => {
  it('counts nothing and answers /metrics with 404 saying metrics are off', async () => {
    const beacon = await startBeacon({ env: { BEACON_METRICS: 'false' } })
    try {
      const res = await fetch(beacon.url + '/metrics')
      expect(res.status).to.equal(404)
      const body = await res.json() as { errors: { code: string, message: string }[] }
      expect(body.errors[0]!.code).to.equal('not_found')
      expect(body.errors[0]!.message).to.include('BEACON_METRICS=false')
      expect(beacon.output()).to.include('"metrics":false')
    } finally {
      await beacon.stop()
      removeDir(beacon.dataDir)
    }
  })
})

describe('BEACON_METRICS_TOKEN', () => {
  // issue 27: /metrics showed per-account counts to anyone who could reach the port.
  it('answers /metrics only with Authorization: Bearer <token> (else 401 metrics_unauthorized), and never logs the token', async () => {
    const token = 'metrics-token-0123456789'
    const node = await startInProcess(undefined, { BEACON_METRICS_TOKEN: token })
    try {
      for (const authorization of [undefined, 'Bearer wrong-token-0123456789', token, `Basic ${token}`]) {
        const res = await fetch(node.url + '/metrics', authorization === undefined ? {} : { headers: { authorization } })
        expect(res.status, String(authorization)).to.equal(401)
        expect(res.headers.get('www-authenticate')).to.equal('Bearer realm="metrics"')
        expect(((await res.json()) as { errors: { code: string }[] }).errors[0]!.code).to.equal('metrics_unauthorized')
      }
      const ok = await fetch(node.url + '/metrics', { headers: { authorization: `Bearer ${token}` } })
      expect(ok.status).to.equal(200)
      expect(await ok.text()).to.include('beacon_http_requests_total')
      expect(JSON.stringify(settingsOf(loadConfig({ BEACON_METRICS_TOKEN: token })))).not.to.include(token)
    } finally {
      await node.close()
    }
  })

  it('refuses a token shorter than 16 characters at start', () => {
    expect(() => loadConfig({ BEACON_METRICS_TOKEN: 'short' })).to.throw(/BEACON_METRICS_TOKEN/)
  })
})

describe('errors in JSON', () => {
  // issue 27: an error echoes what the request sent; a browser must not sniff it into another type.
  it('carry X-Content-Type-Options: nosniff', async () => {
    const node = await startInProcess()
    try {
      for (const [path, init] of [['/nope', {}], ['/campaigns/query', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"account":"<script>"}' }]] as const) {
        const res = await fetch(node.url + path, init)
        expect(res.status).to.be.at.least(400)
        expect(res.headers.get('x-content-type-options'), path).to.equal('nosniff')
      }
    } finally {
      await node.close()
    }
  })
})

describe('Metrics (the registry)', () => {
  const stats = { getStats: () => ({ entryCount: 2, pageSize: 4096, lastPageNumber: 9, mapSize: 1 << 20 }) }
  const store: StoreStats = { isOpen: true, root: stats, outbox: stats, visitors: stats, profiles: stats, deliveries: stats, members: stats }
  const runtime: RuntimeStats = { residentCount: 3, activations: 7, passivations: 4, mailboxDepth: 0 }

  it('reads the actors, mailboxes and LMDB sizes at scrape time', async () => {
    const text = await new Metrics({ runtime: { ...runtime, mailboxDepth: 12 }, store, dataDir: '/nonexistent' }).text()
    expect(sample(text, 'beacon_actor_mailbox_messages')).to.equal(12)
    expect(sample(text, 'beacon_actors_resident')).to.equal(3)
    expect(sample(text, 'beacon_lmdb_used_bytes')).to.equal(40960)
    expect(sample(text, 'beacon_lmdb_file_bytes')).to.equal(0)
  })

  it('shows commit latency, webhook deliveries and the NATS state once they are reported, not before', async () => {
    const metrics = new Metrics({ runtime, store, dataDir: '/nonexistent' })
    const before = await metrics.text()
    for (const name of ['beacon_lmdb_commit_duration_seconds', 'beacon_webhook_deliveries_total', 'beacon_webhook_delivery_duration_seconds', 'beacon_nats_connected']) {
      expect(before).not.to.include(name)
    }
    metrics.observeCommitMs(0.4)
    metrics.recordDelivery('delivered', 120)
    metrics.recordDelivery('dead', 5000)
    metrics.setNatsConnected(true)
    const after = await metrics.text()
    expect(sample(after, 'beacon_lmdb_commit_duration_seconds_count')).to.equal(1)
    expect(sample(after, 'beacon_lmdb_commit_duration_seconds_bucket{le="0.0005"}')).to.equal(1)
    expect(sample(after, 'beacon_webhook_deliveries_total{outcome="delivered"}')).to.equal(1)
    expect(sample(after, 'beacon_webhook_deliveries_total{outcome="dead"}')).to.equal(1)
    expect(sample(after, 'beacon_webhook_delivery_duration_seconds_count{outcome="dead"}')).to.equal(1)
    expect(sample(after, 'beacon_nats_connected')).to.equal(1)
  })

  it('keeps two servers\' counts apart (one registry each)', async () => {
    const a = new Metrics({ runtime, store, dataDir: '/nonexistent' })
    const b = new Metrics({ runtime, store, dataDir: '/nonexistent' })
    a.observeRoute(UNMATCHED)(404, 1, [])
    expect(sample(await a.text(), 'beacon_http_requests_total{route="(unmatched)",method="other",status="404"}')).to.equal(1)
    expect(sample(await b.text(), 'beacon_http_requests_total{route="(unmatched)",method="other",status="404"}')).to.equal(undefined)
  })
})
