// Every page of the panel, opened by its address in Chromium at desktop (1280×800) and phone (390×844)
// width against a real Beacon holding a little of everything, signed out first: not one console error
// (a failed request, the signed-out session probe or a missing /favicon.ico included), no script error;
// at phone width no page wider than the screen, a header one line high, tables that scroll inside their
// frame with no column squeezed into a tall strip. Each page is screenshotted under .artifacts/panel-pages/ (docs/panel.md's images come from here).

import { expect } from 'chai'
import { createServer, type Server } from 'node:http'
import type { Browser, Page } from 'playwright-core'
import { admin, post, removeDir, startBeacon, visitorId, type BeaconProcess } from '../helpers/beacon.js'
import { artifactPath, launchBrowser } from '../helpers/browser.js'
import { until } from '../helpers/until.js'

const OWNER = { email: 'olive@example.com', password: 'owner password 123' }

const WIDTHS = [
  { name: 'desktop', viewport: { width: 1280, height: 800 }, phone: false },
  { name: 'phone', viewport: { width: 390, height: 844 }, phone: true },
] as const

/** Each page by its address under /panel/, with its heading. */
const PAGES: { path: string, heading: string }[] = [
  { path: '', heading: 'Campaigns' },
  { path: 'campaigns/new', heading: 'New campaign' },
  { path: 'campaigns/spring-sale', heading: 'Spring sale' },
  { path: 'campaigns/hero-test/results', heading: 'Results: hero-test' },
  { path: 'reports', heading: 'Reports' },
  { path: 'audiences', heading: 'Audiences' },
  { path: 'webhooks', heading: 'Webhooks' },
  { path: 'webhooks/new', heading: 'New webhook' },
  { path: 'webhooks/crm', heading: 'Orders to the CRM' },
  { path: 'destinations', heading: 'Destinations' },
  { path: 'destinations/new', heading: 'New destination' },
  { path: 'media', heading: 'Media' },
  { path: 'events', heading: 'Events' },
  { path: 'people', heading: 'People' },
  { path: 'tokens', heading: 'API tokens' },
  { path: 'users', heading: 'Users' },
  { path: 'audit', heading: 'Audit log' },
]

describe('panel pages: no console error, desktop and phone width', function () {
  this.timeout(240_000)
  let beacon: BeaconProcess
  let browser: Browser
  let sink: Server
  let account: string
  const errors: string[] = []

  const watch = (page: Page, where: () => string): void => {
    page.on('console', message => { if (message.type() === 'error') errors.push(`${where()}: console error: ${message.text()}`) })
    page.on('pageerror', error => errors.push(`${where()}: script error: ${error.message}`))
    page.on('response', response => { if (response.status() >= 400) errors.push(`${where()}: ${response.status()} for ${response.url()}`) })
  }

  before(async () => {
    sink = createServer((req, res) => { req.resume().on('end', () => res.writeHead(200).end('{}')) })
    await new Promise<void>(resolve => sink.listen(0, '127.0.0.1', resolve))
    const port = (sink.address() as { port: number }).port
    beacon = await startBeacon({ env: { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true', BEACON_REPORT_FOLD_MS: '100', BEACON_SEGMENT_SWEEP_MS: '200' } })
    account = (await admin(beacon.url, 'POST', '/admin/accounts', { name: 'Shoe shop' })).body.account
    const at = (rest: string): string => `/admin/accounts/${account}${rest}`
    const put = async (path: string, body: unknown): Promise<void> => {
      const answer = await admin(beacon.url, 'PUT', at(path), body)
      expect(answer.status, `${path}: ${JSON.stringify(answer.body)}`).to.equal(200)
    }
    expect((await admin(beacon.url, 'POST', at('/users'), { ...OWNER, name: 'Olive Owner', role: 'owner' })).status).to.equal(201)
    await put('/event-types/signup', { required: ['plan'] })
    await put('/campaigns/spring-sale', {
      name: 'Spring sale', status: 'active', priority: 5, trigger: { events: ['pageView'] },
      rule: { all: [{ fact: 'attribute.plan', op: 'eq', value: 'pro' }] }, content: { slot: 'hero', title: 'Spring sale', text: '20 % off every shoe', href: '/sale' },
    })
    await put('/campaigns/hero-test', {
      name: 'Hero test', status: 'active', priority: 1, trigger: { events: ['productView'] }, content: { title: 'New trail shoes' },
      variants: [{ id: 'a', weight: 1 }, { id: 'b', weight: 1, content: { title: 'Trail shoes, 10 % off' } }], goals: [{ event: 'purchase', metric: 'conversion', windowDays: 7 }],
    })
    await put('/segments/shoe-browsers', { description: 'Viewed a product this week', rule: { fact: 'count', event: 'productView', within: '7d', op: 'gte', value: 1 } })
    await put('/segments/vip', { description: 'Chosen by the sales team' })
    await put('/webhooks/crm', {
      name: 'Orders to the CRM', enabled: true, trigger: { kind: 'event', events: ['purchase'] },
      request: { method: 'POST', url: `http://127.0.0.1:${port}/hooks` }, delivery: { mode: 'async', timeoutMs: 5000, batchSize: 1 },
    })
    // A receiver that is never there: its one attempt fails, the delivery is dead.
    await put('/webhooks/erp', {
      name: 'Orders to the ERP', enabled: true, trigger: { kind: 'event', events: ['purchase'] },
      request: { method: 'POST', url: 'http://127.0.0.1:1/orders' }, delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1, maxAttempts: 1 },
    })
    const token = (await admin(beacon.url, 'POST', at('/tokens'), { name: 'backend', attributes: ['*'], access: 'read-write' })).body
    for (let i = 0; i < 4; i++) {
      const visitor = visitorId()
      const write = await post(beacon.url, '/visitors/attributes', { account, token: token.token, visitorId: visitor, attributes: { plan: 'pro', email: `shopper${i}@example.com` } })
      expect(write.status, JSON.stringify(write.body)).to.equal(200)
      await post(beacon.url, '/campaigns/query', { account, visitorId: visitor, platform: 'web', event: 'pageView', path: '/' })
      await post(beacon.url, '/campaigns/query', { account, visitorId: visitor, platform: 'web', event: 'productView', sku: `trail-${i}` })
      await post(beacon.url, '/campaigns/query', { account, visitorId: visitor, platform: 'web', event: 'campaignView', campaignId: 'spring-sale' })
      if (i % 2 === 0) await post(beacon.url, '/campaigns/query', { account, visitorId: visitor, platform: 'web', event: 'campaignClick', campaignId: 'spring-sale' })
      if (i === 0) await post(beacon.url, '/campaigns/query', { account, visitorId: visitor, platform: 'web', event: 'purchase', orderId: 'o-1', orderTotal: 120 })
    }
    await until('the impressions are in the report', async () => {
      const report = await admin(beacon.url, 'GET', at(`/reports?from=${new Date(Date.now() - 86_400_000).toISOString()}&to=${new Date(Date.now() + 3_600_000).toISOString()}`))
      return report.body.rows.some((row: { campaigns: Record<string, { clicks: number }> }) => row.campaigns['spring-sale']?.clicks === 2)
    }, 30_000, 100)
    for (const [id, status] of [['crm', 'delivered'], ['erp', 'dead']]) {
      await until(`the ${id} delivery is ${status}`, async () => (await admin(beacon.url, 'GET', at(`/webhooks/${id}/deliveries?status=${status}`))).body.deliveries.length === 1, 30_000, 100)
    }
    browser = await launchBrowser()
  })
  after(async () => {
    await browser?.close()
    await beacon?.kill()
    if (beacon !== undefined) removeDir(beacon.dataDir)
    sink?.close()
  })

  for (const width of WIDTHS) {
    it(`opens every page at ${width.name} width (${width.viewport.width}×${width.viewport.height}) without a console error`, async () => {
      const context = await browser.newContext({ viewport: width.viewport, isMobile: width.phone, hasTouch: width.phone })
      context.setDefaultTimeout(15_000)
      const page = await context.newPage()
      let where = `${width.name} /panel/ signed out`
      watch(page, () => where)
      const before = errors.length
      await page.goto(`${beacon.url}/panel/`)
      await page.getByLabel('Email').fill(OWNER.email)
      await page.getByLabel('Password').fill(OWNER.password)
      await page.screenshot({ path: artifactPath('panel-pages', `${width.name}-sign-in.png`) })
      await page.getByRole('button', { name: 'Sign in' }).click()
      await page.getByRole('heading', { level: 1, name: 'Campaigns' }).waitFor()
      for (const { path, heading } of PAGES) {
        where = `${width.name} /panel/${path}`
        await page.goto(`${beacon.url}/panel/${path}`)
        await page.getByRole('heading', { level: 1, name: heading }).waitFor()
        await until(`${where} has loaded`, async () => await page.locator('.loading').count() === 0, 15_000, 50)
        await page.locator('.top .account', { hasText: 'Shoe shop' }).waitFor()
        await page.screenshot({ path: artifactPath('panel-pages', `${width.name}-${path === '' ? 'campaigns' : path.replaceAll('/', '-')}.png`), fullPage: true })
        if (width.phone) {
          // Run in the page (a string: this file is compiled without the DOM's types).
          const layout = await page.evaluate(`({
            pageWidth: document.documentElement.scrollWidth,
            // What sticks out of the screen (inside a scrolling table frame is fine), named for the failure message.
            wide: [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > innerWidth + 1 && e.closest('.table-wrap') === null)
              .slice(0, 5).map(e => e.tagName.toLowerCase() + '.' + e.className),
            header: document.querySelector('.top').getBoundingClientRect().height,
            cutTables: [...document.querySelectorAll('.table-wrap')].filter(wrap => wrap.getBoundingClientRect().right > innerWidth + 1).length,
            // A tall row made by a column squeezed to a strip (an id one letter a line): rows of long text are fine.
            squeezed: [...document.querySelectorAll('tbody td')].filter(cell => cell.getBoundingClientRect().width < 80 && cell.getBoundingClientRect().height > 120)
              .map(cell => Math.round(cell.getBoundingClientRect().width) + '×' + Math.round(cell.getBoundingClientRect().height) + ' px: ' + cell.innerText.replace(/\\s+/g, ' ').slice(0, 60)),
          })`) as { pageWidth: number, wide: string[], header: number, cutTables: number, squeezed: string[] }
          expect(layout, where).to.deep.equal({ pageWidth: 390, wide: [], header: layout.header, cutTables: 0, squeezed: [] })
          expect(layout.header, `${where}: header height`).to.be.below(80)
        }
      }
      await context.close()
      expect(errors.slice(before)).to.deep.equal([])
    })
  }

  /** A signed-in owner's page at desktop width, its console watched. */
  async function ownerPage (what: string): Promise<Page> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
    context.setDefaultTimeout(15_000)
    const page = await context.newPage()
    watch(page, () => what)
    await page.goto(`${beacon.url}/panel/`)
    await page.getByLabel('Email').fill(OWNER.email)
    await page.getByLabel('Password').fill(OWNER.password)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.getByRole('heading', { level: 1, name: 'Campaigns' }).waitFor()
    return page
  }

  /** A table's rows as objects keyed by its column heads. */
  async function rowsOf (page: Page, table: string): Promise<Record<string, string>[]> {
    const heads = await page.getByRole('table', { name: table }).getByRole('columnheader').allTextContents()
    const rows = page.getByRole('table', { name: table }).locator('tbody tr')
    const out: Record<string, string>[] = []
    for (let i = 0; i < await rows.count(); i++) {
      const cells = await rows.nth(i).getByRole('cell').allTextContents()
      out.push(Object.fromEntries(heads.map((head, j) => [head, cells[j]!])))
    }
    return out
  }

  it('lists the campaigns with their numbers, and the account name in the header', async () => {
    const page = await ownerPage('campaigns list')
    await page.getByRole('table', { name: 'Campaigns' }).waitFor()
    const rows = await rowsOf(page, 'Campaigns')
    expect(rows.find(r => r.Name === 'Spring sale')).to.deep.include({ Impressions: '4', Views: '4', Clicks: '2', CTR: '50.0 %', Conversions: '—' })
    // The experiment's conversions: one purchase by a visitor it was shown to.
    expect(rows.find(r => r.Name === 'Hero test')).to.deep.include({ Impressions: '4', Conversions: '1' })
    expect(await page.locator('.top .account').textContent()).to.equal('Shoe shop')
    await page.context().close()
    expect(errors).to.deep.equal([])
  })

  it('previews the content as the SDK renders it, ticks trigger events, and says what is wrong in plain words', async () => {
    const page = await ownerPage('campaign editor')
    await page.goto(`${beacon.url}/panel/campaigns/spring-sale`)
    const preview = page.getByTestId('preview')
    await preview.getByRole('link').filter({ hasText: 'Spring sale' }).waitFor()
    expect(await preview.locator('p').textContent()).to.equal('20 % off every shoe')
    // docs/panel.md's picture: the content and its preview.
    await page.getByRole('heading', { level: 2, name: 'Content', exact: true }).evaluate((e: any) => e.scrollIntoView())
    await page.screenshot({ path: artifactPath('panel-pages', 'desktop-campaign-editor.png') })
    await page.getByLabel('Content (JSON)').fill(JSON.stringify({ slot: 'hero', title: 'Summer sale', text: 'Sandals too' }))
    await preview.locator('strong', { hasText: 'Summer sale' }).waitFor()
    await page.getByText('Shown when attribute plan is “pro”.').waitFor()
    const events = page.getByRole('group', { name: 'Trigger events' })
    expect(await events.getByRole('checkbox', { name: 'pageView' }).isChecked()).to.equal(true)
    await events.getByRole('checkbox', { name: 'signup' }).check()
    // The event type goes away behind the page's back: the save is refused, in the form's words.
    expect((await admin(beacon.url, 'DELETE', `/admin/accounts/${account}/event-types/signup`)).status).to.equal(200)
    await page.getByRole('button', { name: 'Save campaign' }).click()
    const alert = page.getByRole('alert').filter({ hasText: 'signup' })
    await alert.waitFor()
    expect(await alert.textContent()).to.equal('Trigger event #2: The event type "signup" is not defined: add it on the Events page first.')
    await page.screenshot({ path: artifactPath('panel-pages', 'desktop-campaign-editor-preview.png'), fullPage: true })
    expect((await admin(beacon.url, 'PUT', `/admin/accounts/${account}/event-types/signup`, { required: ['plan'] })).status).to.equal(200)
    await page.context().close()
    // The refused save is the one failed request expected here.
    expect(errors.filter(e => !/: 400 for .*\/campaigns\/spring-sale$|status of 400/.test(e))).to.deep.equal([])
    errors.length = 0
  })

  it('reads segment rules as sentences and lists manual segments apart', async () => {
    const page = await ownerPage('audiences')
    await page.goto(`${beacon.url}/panel/audiences`)
    const computed = await (async () => { await page.getByRole('table', { name: 'Computed segments' }).waitFor(); return await rowsOf(page, 'Computed segments') })()
    expect(computed.map(r => [r.Segment, r.Rule])).to.deep.equal([['shoe-browsers', 'Visitors who viewed a product at least 1 time in the last 7 days']])
    const manual = await rowsOf(page, 'Manual segments')
    expect(manual.map(r => r.Segment)).to.deep.equal(['vip'])
    await page.context().close()
    expect(errors).to.deep.equal([])
  })

  it('shows each webhook\'s health, and the reports\' totals with dead deliveries in red and campaigns by name', async () => {
    const page = await ownerPage('webhooks and reports')
    await page.goto(`${beacon.url}/panel/webhooks`)
    await page.getByRole('table', { name: 'Webhooks' }).waitFor()
    const health = Object.fromEntries((await rowsOf(page, 'Webhooks')).map(r => [r.Name, r['Health (24 h)']]))
    expect(health).to.deep.equal({ 'Orders to the CRM': 'healthy1 delivered · 0 failing · 0 dead', 'Orders to the ERP': 'dead deliveries0 delivered · 0 failing · 1 dead' })
    await page.goto(`${beacon.url}/panel/reports`)
    const dead = page.locator('.tile-kpi', { hasText: 'Dead deliveries' })
    await until('the dead delivery is in the report', async () => {
      if (await dead.locator('.kpi-value').textContent() === '1') return true
      await page.getByRole('button', { name: 'Refresh' }).click()
      return false
    }, 30_000, 250)
    expect(await dead.getAttribute('class')).to.equal('tile-kpi bad')
    expect(await dead.locator('.kpi-value').evaluate((e: unknown) => (globalThis as any).getComputedStyle(e).color)).to.equal('rgb(180, 35, 24)')
    expect(await page.locator('.tile-kpi', { hasText: 'Impressions' }).locator('.kpi-value').textContent()).to.equal('8')
    expect((await rowsOf(page, 'Campaign totals')).map(r => r.Campaign).sort()).to.deep.equal(['Hero test', 'Spring sale'])
    const legend = page.getByRole('list', { name: 'Webhook deliveries: total per series' })
    expect(await legend.getByRole('listitem').allTextContents()).to.deep.equal(['delivered 1', 'failed 0', 'dead 1'])
    await page.context().close()
    expect(errors).to.deep.equal([])
  })
})
