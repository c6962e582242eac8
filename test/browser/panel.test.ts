// The panel in a real browser against a real Beacon: an owner signs in and sets up a token, an event
// type, media, a campaign built in the condition builder, a computed segment and a webhook to a real
// local sink; events fired through the public API show up in the reports, the segment's count and the
// delivery log; a viewer sees it all and can change nothing. Every page is screenshotted at 1280 px
// (a few at phone width) under .artifacts/panel/.

import { expect } from 'chai'
import { createServer, type IncomingMessage, type Server } from 'node:http'
import { isDeepStrictEqual } from 'node:util'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { admin, post, removeDir, startBeacon, visitorId, type BeaconProcess } from '../helpers/beacon.js'
import { artifactPath, launchBrowser } from '../helpers/browser.js'
import { until as waitUntil } from '../helpers/until.js'

const OWNER = { email: 'owner@example.com', password: 'owner password 123' }
const VIEWER = { email: 'viewer@example.com', password: 'viewer password 123' }
/** A 1×1 PNG: media types are decided by the bytes' signature. */
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64')

interface Sink { url: string, requests: { path: string, body: string }[], server: Server }

async function startSink (): Promise<Sink> {
  const requests: Sink['requests'] = []
  const server = createServer((req: IncomingMessage, res) => {
    let body = ''
    req.setEncoding('utf8').on('data', (chunk: string) => { body += chunk }).on('end', () => {
      requests.push({ path: req.url ?? '', body })
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('sink has no port')
  return { url: `http://127.0.0.1:${address.port}/hooks`, requests, server }
}

/** Retry `check` (which may reload what it reads) until it holds: every 250 ms, for 30 s at most. */
const until = (what: string, check: () => Promise<boolean>): Promise<void> => waitUntil(what, check, 30_000, 250)

describe('panel in a browser', function () {
  this.timeout(180_000)
  let beacon: BeaconProcess
  let sink: Sink
  let browser: Browser
  let owner: BrowserContext
  let page: Page
  let account: string
  const shopper = visitorId()
  /** What the browser reported breaking the page's Content-Security-Policy (none, ever). */
  const violations: string[] = []

  const shot = (name: string, target: Page = page): Promise<Buffer> => target.screenshot({ path: artifactPath('panel', `${name}.png`), fullPage: true })
  const open = async (section: string): Promise<void> => {
    await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: section, exact: true }).click()
    await page.getByRole('heading', { level: 1, name: section }).waitFor()
  }
  const event = (body: Record<string, unknown>): Promise<{ status: number, body: any }> =>
    post(beacon.url, '/campaigns/query', { account, visitorId: shopper, platform: 'web', ...body })

  before(async () => {
    sink = await startSink()
    beacon = await startBeacon({ env: { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true', BEACON_REPORT_FOLD_MS: '100', BEACON_SEGMENT_SWEEP_MS: '200' } })
    const created = await admin(beacon.url, 'POST', '/admin/accounts', { name: 'Shoe shop' })
    account = created.body.account
    const user = await admin(beacon.url, 'POST', `/admin/accounts/${account}/users`, { ...OWNER, name: 'Olive Owner', role: 'owner' })
    expect(user.status, JSON.stringify(user.body)).to.equal(201)
    browser = await launchBrowser()
    owner = await browser.newContext({ viewport: { width: 1280, height: 900 } })
    owner.setDefaultTimeout(15_000)
    page = await owner.newPage()
    page.on('console', message => { if (/Content Security Policy/i.test(message.text())) violations.push(message.text()) })
    page.on('pageerror', error => violations.push(`page error: ${error.message}`))
  })
  after(async () => {
    await browser?.close()
    await beacon?.kill()
    if (beacon !== undefined) removeDir(beacon.dataDir)
    sink?.server.close()
  })

  it('signs an owner in, refusing a wrong password with the server\'s message', async () => {
    await page.goto(`${beacon.url}/panel`)
    await page.getByLabel('Email').fill(OWNER.email)
    await page.getByLabel('Password').fill('not the password')
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.getByRole('alert').waitFor()
    await shot('sign-in')
    await page.getByLabel('Password').fill(OWNER.password)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.getByRole('heading', { level: 1, name: 'Campaigns' }).waitFor()
    expect(page.url()).to.equal(`${beacon.url}/panel/`)
  })

  it('creates an API token, shown once, that works on the public API', async () => {
    await open('API tokens')
    await page.getByLabel('Token name').fill('backend')
    await page.getByLabel('Rate limit (requests per second)').fill('50')
    await page.getByRole('button', { name: 'Create token' }).click()
    const token = (await page.getByTestId('new-token').textContent())!
    expect(token).to.match(/^bk_[0-9a-f]{16}_/)
    await page.getByRole('cell', { name: '50/s' }).waitFor()
    await shot('tokens')
    const write = await post(beacon.url, '/visitors/attributes', { account, token, visitorId: shopper, attributes: { plan: 'pro' } })
    expect(write.status).to.equal(200)
  })

  it('defines a custom event type with its required fields', async () => {
    await open('Events')
    await page.getByLabel('Event type name').fill('signup')
    await page.getByLabel('Required fields').fill('plan, source')
    await page.getByRole('button', { name: 'Save event type' }).click()
    await page.getByRole('cell', { name: 'plan, source' }).waitFor()
    await shot('events')
    const refused = await event({ event: 'signup', plan: 'pro' })
    expect(refused.status).to.equal(400)
  })

  it('uploads an image to the media library', async () => {
    await open('Media')
    await page.getByLabel('Image file').setInputFiles({ name: 'banner.png', mimeType: 'image/png', buffer: PNG })
    await page.getByRole('button', { name: 'Upload' }).click()
    await page.getByText('Uploaded banner.png.').waitFor()
    await page.getByRole('cell', { name: 'image/png' }).waitFor()
    await shot('media')
  })

  it('builds a campaign in the condition builder, with the JSON view in step and the image in its content', async () => {
    await open('Campaigns')
    await page.getByRole('link', { name: 'New campaign' }).click()
    // Typed key by key: the heading follows the name without taking the focus away.
    await page.getByLabel('Name', { exact: true }).pressSequentially('Shoe banner')
    await page.getByRole('heading', { level: 1, name: 'Shoe banner' }).waitFor()
    expect(await page.getByLabel('Name', { exact: true }).inputValue()).to.equal('Shoe banner')
    await page.getByLabel('Priority').fill('10')
    await page.getByRole('group', { name: 'Trigger events' }).getByRole('checkbox', { name: 'productView' }).check()
    await page.getByRole('button', { name: 'Add a condition' }).click()
    await page.getByLabel('Condition Rule.1: fact').fill('event.category')
    await page.getByLabel('Condition Rule.1: value').fill('shoes')
    await page.getByRole('button', { name: 'Add condition' }).click()
    await page.getByLabel('Condition Rule.2: fact').fill('event.price')
    await page.getByLabel('Condition Rule.2: operator').selectOption('gte')
    await page.getByLabel('Condition Rule.2: value').fill('50')
    const rule = { all: [{ fact: 'event.category', op: 'eq', value: 'shoes' }, { fact: 'event.price', op: 'gte', value: 50 }] }
    const json = page.getByLabel('Rule as JSON')
    const jsonShows = (expected: unknown): Promise<void> => until(`the JSON view shows ${JSON.stringify(expected)}`, async () => isDeepStrictEqual(JSON.parse(await json.inputValue()), expected))
    await jsonShows(rule)
    // The JSON view edits the tree too.
    await json.fill(JSON.stringify({ any: rule.all }))
    await until('the builder shows "any"', async () => await page.getByLabel('Rule: match').inputValue() === 'any')
    await page.getByLabel('Rule: match').selectOption('all')
    await jsonShows(rule)
    await page.getByLabel('Impressions at most').fill('5')
    await page.getByRole('button', { name: 'Insert an image…' }).click()
    await page.getByRole('button', { name: 'Use banner.png' }).click()
    await shot('campaign-editor')
    await page.getByRole('button', { name: 'Save campaign' }).click()
    await page.waitForURL(`${beacon.url}/panel/campaigns/shoe-banner`)
    await page.getByRole('heading', { level: 1, name: 'Shoe banner' }).waitFor()
    await jsonShows(rule)
    const saved = await admin(beacon.url, 'GET', `/admin/accounts/${account}/campaigns/shoe-banner`)
    expect(saved.body).to.deep.include({ name: 'Shoe banner', status: 'active', priority: 10, trigger: { events: ['productView'] }, rule, frequencyCap: { max: 5, per: 'day' } })
    const media = await admin(beacon.url, 'GET', `/admin/accounts/${account}/media`)
    expect(saved.body.content).to.deep.equal({ image: beacon.url + media.body.media[0].url })
    const image = await fetch(saved.body.content.image)
    expect(Buffer.from(await image.arrayBuffer())).to.deep.equal(PNG)
  })

  it('tests an event against the campaign and says why it would not match', async () => {
    const eventBox = page.getByLabel('Event (JSON)')
    await eventBox.fill(JSON.stringify({ visitorId: visitorId(), platform: 'web', event: 'productView', sku: 's-1', category: 'shoes', price: 80 }))
    await page.getByRole('button', { name: 'Test', exact: true }).click()
    await page.getByText('Matched: the campaign would be answered.').waitFor()
    await eventBox.fill(JSON.stringify({ visitorId: visitorId(), platform: 'web', event: 'productView', sku: 's-1', category: 'shoes', price: 20 }))
    await page.getByRole('button', { name: 'Test', exact: true }).click()
    await page.getByText('Not matched.').waitFor()
    const failed = page.getByRole('row').filter({ hasText: 'condition' })
    expect(await failed.getByRole('cell', { name: 'fail' }).count()).to.equal(1)
    await shot('campaign-test')
  })

  it('shows the impression of a matching public event in the reports', async () => {
    const answer = await event({ event: 'productView', sku: 'trail-1', category: 'shoes', price: 90 })
    expect(answer.body.campaigns.map((c: { id: string }) => c.id)).to.deep.equal(['shoe-banner'])
    await open('Reports')
    const row = page.getByRole('table', { name: 'Campaign totals' }).getByRole('row').filter({ hasText: 'Shoe banner' })
    await until('the impression is in the report', async () => {
      if (await row.count() === 1 && (await row.getByRole('cell').nth(1).textContent()) === '1') return true
      await page.getByRole('button', { name: 'Refresh' }).click()
      return false
    })
    await page.getByText(/Numbers may be up to \d+ s late\./).waitFor()
    await page.getByLabel('Granularity').selectOption('hour')
    await row.waitFor()
    await shot('reports')
    const csvLink = (await page.getByRole('link', { name: 'Download CSV' }).getAttribute('href'))!
    expect(csvLink).to.include('granularity=hour').and.include('format=csv')
    const csv = await page.evaluate(async (href: string) => await (await fetch(href)).text(), csvLink)
    expect(csv.split(/\r?\n/)[0]).to.equal('t,kind,key,value')
    expect(csv).to.include('shoe-banner')
  })

  it('creates a computed segment and watches its member count rise', async () => {
    await open('Audiences')
    await page.getByRole('button', { name: 'New segment' }).click()
    await page.getByLabel('Segment name').fill('shoe-browsers')
    await page.getByLabel('Condition Segment rule: event').fill('productView')
    await page.getByRole('button', { name: 'Save segment' }).click()
    const members = page.locator('[data-segment="shoe-browsers"]')
    await members.waitFor()
    for (let i = 0; i < 3; i++) {
      const res = await post(beacon.url, '/campaigns/query', { account, visitorId: visitorId(), platform: 'web', event: 'productView', sku: `s-${i}` })
      expect(res.status).to.equal(200)
    }
    await until('the segment counts its members (refreshed by the page)', async () => Number(await members.textContent()) >= 3)
    await page.getByRole('img', { name: /Segment enters and exits per hour: .*shoe-browsers enter/ }).waitFor({ timeout: 30_000 })
    await shot('audiences')
  })

  it('configures a webhook to a local sink, sends a test delivery, and shows a real delivery in the log', async () => {
    await open('Webhooks')
    await page.getByRole('link', { name: 'New webhook' }).click()
    await page.getByLabel('Name', { exact: true }).fill('Orders to the CRM')
    await page.getByLabel('Id', { exact: true }).fill('crm')
    await page.getByLabel('Event types').fill('purchase')
    await page.getByLabel('URL', { exact: true }).fill(sink.url)
    await page.getByLabel('Headers').fill('X-Source: beacon')
    await page.getByLabel('Max attempts').fill('3')
    await page.getByRole('button', { name: 'Save webhook' }).click()
    await page.waitForURL(`${beacon.url}/panel/webhooks/crm`)
    await page.getByRole('heading', { level: 1, name: 'Orders to the CRM' }).waitFor()
    await page.getByRole('button', { name: 'Send test delivery' }).click()
    await page.getByText(/Test delivery succeeded: status 200/).waitFor()
    const before = sink.requests.length
    const purchase = await event({ event: 'purchase', orderId: 'o-1', orderTotal: 120 })
    expect(purchase.status).to.equal(200)
    await until('the delivery is in the log as delivered', async () => {
      await page.getByRole('button', { name: 'Refresh' }).click()
      return await page.getByRole('cell', { name: 'delivered' }).count() === 1
    })
    expect(sink.requests.length).to.be.greaterThan(before)
    await page.getByText(/^1 · last 200$/).click()
    await page.getByText(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC: 200 in [\d.]+ ms$/).waitFor()
    await shot('webhook')
    const webhook = await admin(beacon.url, 'GET', `/admin/accounts/${account}/webhooks/crm`)
    expect(webhook.body).to.deep.include({ name: 'Orders to the CRM', enabled: true, trigger: { kind: 'event', events: ['purchase'] } })
    expect(webhook.body.request).to.deep.include({ method: 'POST', url: sink.url, headers: { 'X-Source': 'beacon' } })
    expect(webhook.body.delivery).to.deep.include({ mode: 'async', maxAttempts: 3 })
  })

  it('looks a visitor up: attributes, segments, behaviour', async () => {
    await open('People')
    await page.getByLabel('Visitor id').fill(shopper)
    await page.getByRole('button', { name: 'Look up' }).click()
    await page.getByRole('cell', { name: '"pro"' }).waitFor()
    await page.getByText('productView: 1').waitFor()
    expect(await page.locator('dt:has-text("First seen") + dd').textContent()).to.match(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/)
    await shot('people')
  })

  it('adds a viewer, and lists the changes in the audit log', async () => {
    await open('Users')
    await page.getByLabel('User email').fill(VIEWER.email)
    await page.getByLabel('Initial password').fill(VIEWER.password)
    await page.getByLabel('Role', { exact: true }).selectOption('viewer')
    await page.getByRole('button', { name: 'Add user' }).click()
    await page.getByRole('cell', { name: VIEWER.email, exact: true }).waitFor()
    await shot('users')
    await open('Audit log')
    await page.getByRole('cell', { name: 'webhook crm' }).first().waitFor()
    await shot('audit')
  })

  it('lets a viewer read but not edit, at phone width', async () => {
    const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true })
    const viewer = await phone.newPage()
    await viewer.goto(`${beacon.url}/panel/campaigns/shoe-banner`)
    await viewer.getByLabel('Email').fill(VIEWER.email)
    await viewer.getByLabel('Password').fill(VIEWER.password)
    await viewer.getByRole('button', { name: 'Sign in' }).click()
    await viewer.getByRole('heading', { level: 1, name: 'Shoe banner' }).waitFor()
    expect(await viewer.getByRole('button', { name: 'Save campaign' }).isDisabled()).to.equal(true)
    expect(await viewer.getByLabel('Name', { exact: true }).isDisabled()).to.equal(true)
    expect(await viewer.getByRole('heading', { name: 'Test an event' }).count()).to.equal(0)
    await shot('phone-campaign-viewer', viewer)
    await viewer.getByRole('button', { name: 'Menu' }).click()
    const nav = viewer.getByRole('navigation', { name: 'Sections' })
    expect(await nav.getByRole('link', { name: 'Users' }).count()).to.equal(0)
    expect(await nav.getByRole('link', { name: 'API tokens' }).count()).to.equal(0)
    await shot('phone-menu', viewer)
    await nav.getByRole('link', { name: 'Campaigns' }).click()
    await viewer.getByRole('cell', { name: 'Shoe banner' }).waitFor()
    expect(await viewer.getByRole('link', { name: 'New campaign' }).count()).to.equal(0)
    await shot('phone-campaigns', viewer)
    await viewer.getByRole('button', { name: 'Menu' }).click()
    await nav.getByRole('link', { name: 'Reports' }).click()
    await viewer.getByRole('table', { name: 'Campaign totals' }).getByRole('cell', { name: 'Shoe banner' }).waitFor()
    await shot('phone-reports', viewer)
    // The server refuses what the page hides: the viewer's own session cannot change a campaign.
    const status = await viewer.evaluate(async (path: string) => (await fetch(path, {
      method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'x', status: 'paused', priority: 0, trigger: {}, content: {} }),
    })).status, `/admin/accounts/${account}/campaigns/shoe-banner`)
    expect(status).to.equal(403)
    await phone.close()
  })

  // issue 27: an unguarded decodeURIComponent left the panel on "Loading" (and threw a script error).
  it('shows a page that does not exist for a malformed address (/panel/campaigns/%E0%A4%A)', async () => {
    await page.goto(`${beacon.url}/panel/campaigns/%E0%A4%A`)
    await page.getByText('No such page.').waitFor()
    await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Campaigns' }).waitFor()
  })

  it("shows an experiment's results: variants, the comparison and the too-few-visitors warning", async () => {
    const experiment = {
      name: 'Hero test', status: 'active', priority: 1, trigger: { events: ['pageView'], paths: ['/hero-test'] }, content: { hero: 'default' },
      variants: [{ id: 'a', weight: 1 }, { id: 'b', weight: 1, content: { hero: 'B' } }], goals: [{ event: 'purchase', metric: 'conversion', windowDays: 7 }],
    }
    expect((await admin(beacon.url, 'PUT', `/admin/accounts/${account}/campaigns/hero-test`, experiment)).status).to.equal(200)
    for (let i = 0; i < 6; i++) await post(beacon.url, '/campaigns/query', { account, visitorId: visitorId(), platform: 'web', event: 'pageView', path: '/hero-test' })
    await page.goto(`${beacon.url}/panel/campaigns/hero-test`)
    await page.getByRole('link', { name: 'Experiment results' }).click()
    await page.getByRole('heading', { level: 1, name: 'Results: hero-test' }).waitFor()
    const variants = page.getByRole('table', { name: 'Variants' })
    await variants.getByRole('cell', { name: 'a', exact: true }).waitFor()
    await variants.getByRole('cell', { name: 'b', exact: true }).waitFor()
    await page.getByRole('table', { name: 'Against a' }).getByRole('cell', { name: 'b', exact: true }).waitFor()
    await page.getByRole('alert').filter({ hasText: 'the intervals assume at least 100 per variant' }).waitFor()
    await shot('experiment-results')
  })

  it('ran every page without a script error or a Content-Security-Policy violation', () => {
    expect(violations).to.deep.equal([])
  })

  it('signs out: the session no longer opens the panel', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click()
    await page.getByRole('button', { name: 'Sign in' }).waitFor()
    await page.reload()
    await page.getByRole('button', { name: 'Sign in' }).waitFor()
  })
})
