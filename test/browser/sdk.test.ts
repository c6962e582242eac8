// The browser SDK in a real browser: a shop page on one loopback origin loads the SDK from Beacon on
// another, and everything the issue asks for is shown end to end against a real Beacon process.

import { expect } from 'chai'
import { connect, createServer, type Server, type Socket } from 'node:net'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { artifactPath, launchBrowser, servePages, type PageServer } from '../helpers/browser.js'
import { admin, createTenant, removeDir, signProfile, startBeacon, type BeaconProcess, type Tenant } from '../helpers/beacon.js'
import { until } from '../helpers/until.js'

// The functions passed to page.evaluate run in the page; the server's compilation has no DOM types, so
// the few page globals they use are declared here, for this file only.
declare const window: any
declare const document: { cookie: string }
declare const localStorage: { getItem: (key: string) => string | null }
declare const navigator: { onLine: boolean }
declare class DOMException { constructor (message: string, name: string) }

const ARTIFACTS = 'sdk'
const UUID4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

/** The shop's page: the SDK from Beacon, a slot for campaigns, and what the SDK reported kept on window. */
function shopPage (beaconUrl: string, account: string, init = ''): string {
  return `<!doctype html><html><head><title>Shop</title>
<style>body{font:16px sans-serif;margin:2em} [data-beacon-slot]{border:2px dashed #888;padding:1em;margin:1em 0}</style></head>
<body><h1>The shoe shop</h1>
<div data-beacon-slot="hero">No offer yet</div>
<script src="${beaconUrl}/sdk/beacon.js"></script>
<script>
window.errors = []; window.seen = []
Beacon.init({ endpoint: ${JSON.stringify(beaconUrl)}, account: ${JSON.stringify(account)}, onError: e => errors.push(e)${init} })
Beacon.onCampaigns((campaigns, event) => seen.push([event, campaigns.map(c => c.id)]))
</script></body></html>`
}

/**
 * A TCP forwarder on a port of its own, in front of Beacon (as a load balancer would be): Beacon can
 * stop and come back on another port while the page keeps one endpoint. While Beacon is down, each
 * connection is closed at once, as a refused one would be.
 */
async function forwarder (target: () => number): Promise<{ url: string, close: () => Promise<void> }> {
  const sockets = new Set<Socket>()
  const server: Server = createServer(client => {
    const upstream = connect(target(), '127.0.0.1')
    for (const socket of [client, upstream]) {
      sockets.add(socket)
      socket.on('close', () => sockets.delete(socket))
      socket.on('error', () => { client.destroy(); upstream.destroy() })
    }
    client.pipe(upstream).pipe(client)
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  return {
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      for (const socket of sockets) socket.destroy()
      await new Promise<void>(resolve => server.close(() => resolve()))
    },
  }
}

describe('browser SDK in Chromium', function () {
  this.timeout(120_000)
  let beacon: BeaconProcess
  let browser: Browser
  let shop: PageServer
  let elsewhere: PageServer
  let tenant: Tenant
  const pages: Record<string, string> = {}
  const otherPages: Record<string, string> = {}

  let lb: { url: string, close: () => Promise<void> }

  /** The pages, for Beacon where it is now (it restarts on another port). */
  function writePages (): void {
    pages['/'] = shopPage(beacon.url, tenant.account)
    pages['/sale'] = '<!doctype html><p>Sale</p>'
    pages['/consent'] = shopPage(beacon.url, tenant.account, ', consent: false')
    pages['/small-queue'] = shopPage(beacon.url, tenant.account, ', queueMax: 2')
    // Batches that leave only when full (2 events) or when something else makes them.
    pages['/slow-batches'] = shopPage(beacon.url, tenant.account, ', batchDelayMs: 600000, batchMax: 2')
    // The SDK from Beacon, the events through the forwarder.
    pages['/behind-lb'] = shopPage(beacon.url, tenant.account).replace(`endpoint: ${JSON.stringify(beacon.url)}`, `endpoint: ${JSON.stringify(lb.url)}`)
    otherPages['/'] = shopPage(beacon.url, tenant.account)
  }

  const visitor = async (id: string) => (await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/visitors/${id}`)).body
  const count = async (id: string, event: string): Promise<number> => (await visitor(id)).counts?.[event] ?? 0

  async function openShop (context?: BrowserContext, path = '/'): Promise<Page> {
    const page = await (context ?? browser).newPage()
    await page.goto(shop.origin + path)
    await page.waitForFunction(() => typeof window.Beacon?.visitorId() === 'string')
    return page
  }

  before(async () => {
    beacon = await startBeacon()
    tenant = await createTenant(beacon.url, 'Shoe shop')
    shop = await servePages(pages)
    elsewhere = await servePages(otherPages)
    lb = await forwarder(() => beacon.port)
    writePages()
    const patched = await admin(beacon.url, 'PATCH', `/admin/accounts/${tenant.account}`, { allowedOrigins: [shop.origin] })
    expect(patched.status).to.equal(200)
    const campaign = await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/campaigns/summer`, {
      name: 'Summer shoes', status: 'active', priority: 10, trigger: { events: ['productView'] },
      rule: { fact: 'event.price', op: 'gte', value: 50 },
      content: { slot: 'hero', title: 'Summer shoes -20%', text: 'Only this week.', href: '/sale' },
    })
    expect(campaign.status, JSON.stringify(campaign.body)).to.equal(200)
    browser = await launchBrowser()
  })

  after(async () => {
    await browser?.close()
    await shop?.close()
    await elsewhere?.close()
    await lb?.close()
    await beacon?.stop()
    if (beacon !== undefined) removeDir(beacon.dataDir)
  })

  it('generates a UUID v4 visitor id and keeps it in localStorage across reloads', async () => {
    const page = await openShop()
    const id = await page.evaluate(() => window.Beacon.visitorId() as string)
    expect(id).to.match(UUID4)
    await page.reload()
    expect(await page.evaluate(() => window.Beacon.visitorId())).to.equal(id)
    expect(await page.evaluate(() => localStorage.getItem('beacon_vid'))).to.equal(id)
    await page.close()
  })

  it('falls back to a first-party cookie when localStorage is unavailable', async () => {
    const context = await browser.newContext()
    await context.addInitScript(() => {
      Object.defineProperty(window, 'localStorage', { get () { throw new DOMException('blocked', 'SecurityError') } })
    })
    const page = await openShop(context)
    const id = await page.evaluate(() => window.Beacon.visitorId() as string)
    expect(id).to.match(UUID4)
    expect(await page.evaluate(() => document.cookie)).to.include(`beacon_vid=${id}`)
    await page.reload()
    expect(await page.evaluate(() => window.Beacon.visitorId())).to.equal(id)
    await context.close()
  })

  it('fires page, product and purchase events, renders the matching campaign into its slot and reports its view and click', async () => {
    const page = await openShop()
    const id = await page.evaluate(() => window.Beacon.visitorId() as string)
    expect(await page.evaluate(() => window.Beacon.page())).to.deep.equal([])
    const campaigns = await page.evaluate(() => window.Beacon.productView({ sku: 'SHOE-1', price: 99, category: 'shoes' }))
    expect(campaigns.map((c: { id: string }) => c.id)).to.deep.equal(['summer'])
    await page.waitForSelector('[data-beacon-slot="hero"][data-beacon-campaign="summer"] strong')
    expect(await page.textContent('[data-beacon-slot="hero"]')).to.equal('Summer shoes -20%Only this week.')
    await page.screenshot({ path: artifactPath(ARTIFACTS, 'shop-with-campaign.png') })
    expect(await page.evaluate(() => window.Beacon.purchase({ orderId: 'o-1', orderTotal: 99, purchasedItems: ['SHOE-1'] }))).to.deep.equal([])
    expect(await page.evaluate(() => window.seen)).to.deep.equal([['pageView', []], ['productView', ['summer']], ['purchase', []]])
    await until('the campaign view', async () => await count(id, 'campaignView') === 1)
    const v = await visitor(id)
    expect(v.counts).to.include({ pageView: 1, productView: 1, purchase: 1, campaignView: 1 })
    expect(v.viewedSkus).to.deep.equal(['SHOE-1'])
    // The click leaves the page (the link goes to /sale): the report still arrives.
    await Promise.all([page.waitForURL(`${shop.origin}/sale`), page.click('[data-beacon-slot="hero"] a')])
    await until('the campaign click', async () => await count(id, 'campaignClick') === 1)
    expect(await page.evaluate(() => 1)).to.equal(1)
    await page.close()
  })

  it('is blocked by the browser on an origin the account does not allow', async () => {
    const page = await browser.newPage()
    await page.goto(`${elsewhere.origin}/`)
    const id = await page.evaluate(() => window.Beacon.visitorId() as string)
    expect(await page.evaluate(() => window.Beacon.productView({ sku: 'SHOE-1', price: 99 }))).to.deep.equal([])
    const errors = await page.evaluate(() => window.errors as { code: string }[])
    expect(errors.map(e => e.code)).to.include('network_error')
    // A plain fetch from this origin fails the same way: the preflight is refused.
    const direct = await page.evaluate(async ([url, account, visitorId]) => {
      try {
        await fetch(`${url}/campaigns/query?account=${account}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ account, visitorId, platform: 'web', event: 'pageView' }) })
        return 'delivered'
      } catch (error) {
        return String(error)
      }
    }, [beacon.url, tenant.account, id])
    expect(direct).to.match(/TypeError/)
    await page.screenshot({ path: artifactPath(ARTIFACTS, 'disallowed-origin.png') })
    expect((await visitor(id)).counts ?? {}).to.deep.equal({})
    await page.close()
  })

  it('refuses an unsigned identify (the event is still counted, anonymously) and links the profile on a signed one', async () => {
    const page = await openShop()
    const id = await page.evaluate(() => window.Beacon.visitorId() as string)
    await page.evaluate(async () => {
      const B = window.Beacon
      B.identify('ana@example.com', 'ab'.repeat(32))
      await B.page()
    })
    expect((await page.evaluate(() => window.errors as { code: string }[])).map(e => e.code)).to.deep.equal(['identity_unverified'])
    let v = await visitor(id)
    expect(v.profileId ?? null).to.equal(null)
    expect(v.counts).to.include({ pageView: 1 })

    const signature = signProfile(tenant.identitySecret, 'ana@example.com')
    await page.evaluate(async (sig) => {
      const B = window.Beacon
      B.identify('ana@example.com', sig)
      await B.page()
    }, signature)
    v = await visitor(id)
    expect(v.profileId).to.equal('ana@example.com')
    const profile = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/profiles/${encodeURIComponent('ana@example.com')}`)
    expect(profile.body.visitors).to.deep.equal([id])
    await page.close()
  })

  it('queues events while Beacon is down and sends them, in order, when it comes back', async () => {
    const page = await openShop(undefined, '/behind-lb')
    const id = await page.evaluate(() => window.Beacon.visitorId() as string)
    const { dataDir } = beacon
    await beacon.stop()
    const answers = await page.evaluate(async () => {
      const B = window.Beacon
      return [await B.productView({ sku: 'OFF-1' }), await B.productView({ sku: 'OFF-2' })]
    })
    expect(answers).to.deep.equal([[], []])
    expect((await page.evaluate(() => window.errors as { code: string }[])).map(e => e.code)).to.include('network_error')
    await page.screenshot({ path: artifactPath(ARTIFACTS, 'offline.png') })
    beacon = await startBeacon({ dataDir })
    writePages()
    await until('the queued events', async () => (await visitor(id)).viewedSkus?.length === 2, 60_000)
    expect((await visitor(id)).viewedSkus).to.deep.equal(['OFF-2', 'OFF-1'])
    await page.close()
  })

  it('settles the promise of every event queued behind one that fails, at that failure (none left pending)', async () => {
    const context = await browser.newContext()
    const page = await openShop(context)
    // Every event request fails at the network, as with Beacon unreachable; the SDK itself still loads.
    await page.route('**/campaigns/query**', route => route.abort('connectionrefused'))
    const outcome = await page.evaluate(async () => {
      const B = window.Beacon
      const states = ['pending', 'pending', 'pending']
      // Three at once: the first goes out, the other two wait behind it in the queue.
      const promises = [B.productView({ sku: 'Q-1' }), B.productView({ sku: 'Q-2' }), B.productView({ sku: 'Q-3' })]
      promises.forEach((promise: Promise<unknown>, i: number) => { void promise.then(() => { states[i] = 'settled' }) })
      const first = await promises[0]
      // Promises settled by then have run their callbacks before a new task starts.
      await new Promise(resolve => setTimeout(resolve, 0))
      return { first, states, answers: await Promise.race([Promise.all(promises), new Promise(resolve => setTimeout(resolve, 0, 'still pending'))]) }
    })
    expect(outcome.first).to.deep.equal([])
    expect(outcome.states).to.deep.equal(['settled', 'settled', 'settled'])
    expect(outcome.answers).to.deep.equal([[], [], []])
    expect((await page.evaluate(() => window.errors as { code: string }[])).map(e => e.code)).to.include('network_error')
    await context.close()
  })

  it('queues events while the browser is offline, at most queueMax (the oldest dropped), and sends them when it is back online', async () => {
    const context = await browser.newContext()
    const page = await openShop(context, '/small-queue')
    const id = await page.evaluate(() => window.Beacon.visitorId() as string)
    await context.setOffline(true)
    const answers = await page.evaluate(async () => {
      const B = window.Beacon
      return [await B.productView({ sku: 'AWAY-1' }), await B.productView({ sku: 'AWAY-2' }), await B.productView({ sku: 'AWAY-3' })]
    })
    expect(answers).to.deep.equal([[], [], []])
    expect(await page.evaluate(() => navigator.onLine)).to.equal(false)
    expect((await page.evaluate(() => window.errors as { code: string }[])).map(e => e.code)).to.include('queue_full')
    await context.setOffline(false)
    await until('the events sent when back online', async () => (await visitor(id)).viewedSkus?.length === 2)
    expect((await visitor(id)).viewedSkus).to.deep.equal(['AWAY-3', 'AWAY-2'])
    await context.close()
  })

  it('flushes the queue with keepalive requests when the page closes: the last event arrives', async () => {
    // A context of its own: no preflight cached from the other tests, the keepalive requests need theirs.
    const context = await browser.newContext()
    const page = await openShop(context)
    const id = await page.evaluate(() => window.Beacon.visitorId() as string)
    // Three events at once: one goes out, two wait in the queue when the page closes.
    await page.evaluate(() => {
      const B = window.Beacon
      B.productView({ sku: 'LAST-1' })
      B.productView({ sku: 'LAST-2' })
      B.productView({ sku: 'LAST-3' })
    })
    await page.close({ runBeforeUnload: true })
    await until('the last events', async () => (await visitor(id)).viewedSkus?.length === 3)
    expect([...(await visitor(id)).viewedSkus].sort()).to.deep.equal(['LAST-1', 'LAST-2', 'LAST-3'])
    await context.close()
  })

  it('sends events that need no campaigns together to /events/batch, and an event tracked with wait alone, in order', async () => {
    const page = await openShop()
    const id = await page.evaluate(() => window.Beacon.visitorId() as string)
    const sent: { path: string, events: number }[] = []
    page.on('request', request => {
      const path = new URL(request.url()).pathname
      if (request.method() === 'POST' && path !== '/sdk/beacon.js') sent.push({ path, events: (JSON.parse(request.postData() ?? '{}') as { events?: unknown[] }).events?.length ?? 1 })
    })
    // Three page views wait together (a few hundred ms), then leave in one request.
    const answers = await page.evaluate(async () => {
      const B = window.Beacon
      return await Promise.all([B.track('pageView', { path: '/a' }), B.track('pageView', { path: '/b' }), B.track('pageView', { path: '/c' })])
    })
    expect(answers).to.deep.equal([[], [], []])
    expect(sent).to.deep.equal([{ path: '/events/batch', events: 3 }])
    expect((await visitor(id)).counts).to.deep.equal({ pageView: 3 })
    // Batched events wait behind nothing: one tracked with wait sends those before it first, then goes alone with its campaigns.
    const [campaigns] = await page.evaluate(async () => {
      const B = window.Beacon
      const batched = B.track('pageView', { path: '/d' })
      return [await B.track('productView', { sku: 'W-1', price: 99 }, { wait: true }), await batched]
    })
    expect(campaigns.map((c: { id: string }) => c.id)).to.deep.equal(['summer'])
    expect(sent.slice(1, 3)).to.deep.equal([{ path: '/events/batch', events: 1 }, { path: '/campaigns/query', events: 1 }])
    expect((await visitor(id)).counts).to.include({ pageView: 4, productView: 1 })
    // The campaign shown is reported in a batch too.
    await until('the campaign view', async () => await count(id, 'campaignView') === 1)
    expect(sent.filter(s => s.path === '/campaigns/query')).to.have.length(1)
    await page.close()
  })

  it('sends a batch as soon as it is full, and flushes the waiting one with keepalive when the page closes', async () => {
    const context = await browser.newContext()
    const page = await openShop(context, '/slow-batches')
    const id = await page.evaluate(() => window.Beacon.visitorId() as string)
    // Two fill a batch: they leave at once, not after the (ten-minute) wait.
    expect(await page.evaluate(async () => await Promise.all([window.Beacon.track('pageView', { path: '/1' }), window.Beacon.track('pageView', { path: '/2' })]))).to.deep.equal([[], []])
    expect((await visitor(id)).counts).to.deep.equal({ pageView: 2 })
    // One more waits; the page closes: it leaves then.
    await page.evaluate(() => { window.Beacon.track('pageView', { path: '/3' }) })
    expect((await visitor(id)).counts).to.deep.equal({ pageView: 2 })
    await page.close({ runBeforeUnload: true })
    await until('the batched event sent on page hide', async () => await count(id, 'pageView') === 3)
    expect((await visitor(id)).lastPath).to.equal('/3')
    await context.close()
  })

  it('sends nothing and stores nothing before consent, then sends what waited', async () => {
    const page = await browser.newPage()
    const sent: string[] = []
    page.on('request', request => { if (request.url().includes('/campaigns/query')) sent.push(request.method()) })
    await page.goto(`${shop.origin}/consent`)
    await page.waitForFunction(() => typeof window.Beacon === 'object')
    void page.evaluate(() => { window.pending = window.Beacon.page() })
    expect(await page.evaluate(() => window.Beacon.visitorId())).to.equal(null)
    expect(await page.evaluate(() => [localStorage.getItem('beacon_vid'), document.cookie])).to.deep.equal([null, ''])
    expect(sent).to.deep.equal([])
    await page.evaluate(() => window.Beacon.consent(true))
    const id = await page.evaluate(() => window.Beacon.visitorId() as string)
    expect(id).to.match(UUID4)
    await page.evaluate(() => window.pending)
    expect(await count(id, 'pageView')).to.equal(1)
    // Withdrawn: the id is forgotten and nothing more is sent.
    await page.evaluate(() => window.Beacon.consent(false))
    expect(await page.evaluate(() => [window.Beacon.visitorId(), localStorage.getItem('beacon_vid')])).to.deep.equal([null, null])
    const before = sent.length
    expect(await page.evaluate(() => window.Beacon.page())).to.deep.equal([])
    expect(sent.length).to.equal(before)
    await page.close()
  })

  it('tells Beacon the purposes consented to, and withdraws them with consent(false)', async () => {
    const page = await browser.newPage()
    await page.goto(`${shop.origin}/consent`)
    await page.waitForFunction(() => typeof window.Beacon === 'object')
    await page.evaluate(() => window.Beacon.consent(true, ['ads', 'analytics']))
    const id = await page.evaluate(() => window.Beacon.visitorId() as string)
    await until('the purposes saved', async () => (await visitor(id)).attributes?.consent?.length === 2)
    expect((await visitor(id)).attributes.consent).to.deep.equal(['ads', 'analytics'])
    const errors = await page.evaluate(() => {
      window.Beacon.consent(true, ['marketing'])
      return window.errors.map((error: { code: string }) => error.code)
    })
    expect(errors).to.deep.equal(['invalid_consent'])
    await page.evaluate(() => window.Beacon.consent(false))
    await until('withdrawn', async () => (await visitor(id)).attributes?.consent?.length === 0)
    await page.close()
  })

  it('never throws into the host page', async () => {
    const page = await openShop()
    const results = await page.evaluate(async () => {
      const B = window.Beacon
      const out: unknown[] = []
      out.push(B.track(undefined, 5) instanceof Promise)
      out.push(await B.productView(null))
      out.push(B.onCampaigns(() => { throw new Error('listener bug') }) instanceof Function)
      out.push(await B.page())
      B.identify(42, 'not hex')
      out.push(await B.page())
      B.init(null)
      out.push(await B.page())
      return out
    })
    expect(results).to.deep.equal([true, [], true, [], [], []])
    const codes = (await page.evaluate(() => window.errors as { code: string }[])).map(e => e.code)
    expect(codes).to.include.members(['invalid_field', 'sdk_error', 'invalid_identity'])
    expect(codes).to.not.include('identity_unverified')
    await page.close()
  })
})
