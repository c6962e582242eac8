// Saved reports over a large retained log after a start (docs/reports.md, "How it is computed"): the
// server process answers at once while the log loads into the reports' columns in the background
// (/healthz, events, saved report definitions), results answer 503 reports_loading with Retry-After
// until the load is done, and then count every logged event exactly once: the seeded ones and those
// sent during the load. A real server process over a real LMDB folder seeded beforehand.

import { expect } from 'chai'
import { Store } from '../../src/store/store.js'
import { EventLog } from '../../src/store/event-log.js'
import { admin, post, removeDir, startBeacon, startWithTenant, visitorId, type BeaconProcess, type Tenant } from '../helpers/beacon.js'
import { expectError } from '../helpers/errors.js'

/** Enough rows that the load takes a while even on a quiet core (about 300,000 rows/s). */
const SEEDED = 600_000
const SEEDED_VISITORS = 1000

describe('saved reports: the log loads in the background after a start', function () {
  this.timeout(300_000)
  let beacon: BeaconProcess | undefined
  let tenant: Tenant
  afterEach(async () => {
    await beacon?.stop()
    if (beacon !== undefined) removeDir(beacon.dataDir)
    beacon = undefined
  })

  it('serves while loading, answers 503 reports_loading for results until ready, then counts each event once', async () => {
    ({ beacon, tenant } = await startWithTenant())
    const dataDir = beacon.dataDir
    await beacon.stop()
    // The seeded log: pageViews of 1,000 visitors over the last hour, written as the server writes them.
    const startMs = Date.now() - 3_600_000
    const store = new Store({ path: dataDir, durability: 'committed' })
    const log = new EventLog(store, { retentionMs: 30 * 86_400_000, sizeMaxBytes: 0 })
    store.events.transactionSync(() => {
      for (let i = 0; i < SEEDED; i++) log.append(tenant.account, `seed-${i % SEEDED_VISITORS}`, null, { event: 'pageView', platform: 'web' }, startMs + Math.floor(i / 200), [])
    })
    await store.close()

    beacon = await startBeacon({ dataDir })
    const url = beacon.url
    const base = `/admin/accounts/${tenant.account}/saved-reports`
    const range = { from: new Date(startMs - 3_600_000).toISOString(), to: new Date(Date.now() + 3_600_000).toISOString() }
    const byKind = { name: 'by kind', metric: { type: 'events' }, breakdown: { by: 'kind' }, range, granularity: 'hour' }
    const unique = { name: 'visitors', metric: { type: 'uniqueVisitors' }, range, granularity: 'hour' }
    let sent = 0
    const send = async (): Promise<void> => {
      const res = await post(url, '/campaigns/query', { account: tenant.account, visitorId: visitorId(), event: 'productView', sku: 'sku-1', platform: 'web' })
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
      sent++
    }

    // While loading: results and previews 503 with Retry-After; everything else answers.
    const saved = await admin(url, 'POST', base, byKind)
    expect(saved.status, JSON.stringify(saved.body)).to.equal(201)
    const id = saved.body.id as string
    let loadingAnswers = 0
    let previewsRefused = 0
    let sentWhileLoading = 0
    for (;;) {
      const result = await admin(url, 'GET', `${base}/${id}/result`)
      if (result.status === 200) break
      expectError(result, 'reports_loading')
      expect(result.headers.get('retry-after')).to.equal('2')
      // The load may end between the two requests: then the preview answers (and the next result too).
      const previewed = await admin(url, 'POST', `${base}-preview`, unique)
      if (previewed.status !== 200) {
        expectError(previewed, 'reports_loading')
        previewsRefused++
      }
      loadingAnswers++
      expect((await fetch(`${url}/healthz`)).status).to.equal(200)
      expect((await admin(url, 'GET', base)).status).to.equal(200)
      await send()
      sentWhileLoading = sent
    }
    expect(loadingAnswers, 'results answered 503 while the log loaded').to.be.greaterThan(0)
    expect(previewsRefused, 'previews answered 503 while the log loaded').to.be.greaterThan(0)
    expect(sentWhileLoading).to.be.greaterThan(0)
    await send()
    await send()

    // Ready: the seeded events and every event sent (during the load and after), each once.
    const kinds = await admin(url, 'GET', `${base}/${id}/result`)
    expect(kinds.status, JSON.stringify(kinds.body)).to.equal(200)
    const totals = Object.fromEntries((kinds.body.totals as Array<{ group: string, value: number }>).map(t => [t.group, t.value]))
    expect(totals).to.deep.equal({ pageView: SEEDED, productView: sent })
    expect(kinds.body.eventsRead).to.equal(SEEDED + sent)
    const visitors = await admin(url, 'POST', `${base}-preview`, unique)
    expect(visitors.status, JSON.stringify(visitors.body)).to.equal(200)
    expect(visitors.body.totals[0].value).to.equal(SEEDED_VISITORS + sent)
    expect(beacon.output()).to.match(/"events":600000,[^\n]*"msg":"saved reports: event log loaded"/)
  })
})
