// The panel's People and Audiences pages over many people, in Chromium against a real Beacon: the
// recently active visitors latest first, a search by attribute value opening the person found, and a
// segment's preview of who matches now (count and sample) before it is saved. Any console error (a
// failed request included) or script error fails the test; at phone width (390 px) the page stays within
// the screen. Screenshots under .artifacts/panel-people/.

import { expect } from 'chai'
import type { Browser, Page } from 'playwright-core'
import { admin, createTenant, post, removeDir, startBeacon, type BeaconProcess, type Tenant } from '../helpers/beacon.js'
import { artifactPath, launchBrowser, signedInPanel } from '../helpers/browser.js'

const OWNER = { email: 'olive@example.com', password: 'owner password 123' }
const ANN = 'aaaaaaaa-1111-4000-8000-000000000001'
const BOB = 'bbbbbbbb-2222-4000-8000-000000000002'
const CAT = 'cccccccc-3333-4000-8000-000000000003'

describe('panel in a browser: people search, recently active, segment preview', function () {
  this.timeout(120_000)
  let beacon: BeaconProcess
  let tenant: Tenant
  let browser: Browser
  let page: Page
  const problems: string[] = []
  const shot = (name: string): Promise<Buffer> => page.screenshot({ path: artifactPath('panel-people', `${name}.png`), fullPage: true })

  async function attributes (visitorId: string, values: Record<string, unknown>): Promise<void> {
    const res = await post(beacon.url, '/visitors/attributes', { account: tenant.account, token: tenant.token, visitorId, attributes: values })
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
  }

  before(async () => {
    beacon = await startBeacon()
    tenant = await createTenant(beacon.url, 'Shoe shop')
    const user = await admin(beacon.url, 'POST', `/admin/accounts/${tenant.account}/users`, { ...OWNER, role: 'owner' })
    expect(user.status, JSON.stringify(user.body)).to.equal(201)
    // Activity in this order (each write dates the visitor): Ann, Bob, then Cat last.
    await attributes(ANN, { email: 'ann@example.com', plan: 'pro' })
    await new Promise(resolve => setTimeout(resolve, 20))
    await attributes(BOB, { email: 'bob@example.com', plan: 'free' })
    await new Promise(resolve => setTimeout(resolve, 20))
    await attributes(CAT, { email: 'cat@example.com', plan: 'pro' })
    browser = await launchBrowser()
    page = await signedInPanel(browser, beacon.url, OWNER, problems)
  })
  after(async () => {
    await browser?.close()
    await beacon?.kill()
    if (beacon !== undefined) removeDir(beacon.dataDir)
  })
  afterEach(() => { expect(problems).to.deep.equal([]) })

  it('lists the recently active visitors, latest first', async () => {
    await page.goto(`${beacon.url}/panel/people`)
    const table = page.getByRole('table', { name: 'Recently active visitors' })
    await table.waitFor()
    const ids = await table.locator('tbody tr td:first-child').allTextContents()
    expect(ids).to.deep.equal([CAT, BOB, ANN])
    await page.getByText('Examined all 3 records of the account.').waitFor()
  })

  it('finds a visitor by attribute value and opens its record', async () => {
    await page.getByRole('search', { name: 'Find people' }).getByLabel('Attribute').fill('email')
    await page.getByRole('search', { name: 'Find people' }).getByLabel('Value').fill('BOB@example.com')
    await page.getByRole('button', { name: 'Search', exact: true }).click()
    const found = page.getByRole('table', { name: 'People found' })
    await found.waitFor()
    expect(await found.locator('tbody tr td:first-child').allTextContents()).to.deep.equal([BOB])
    await page.getByText(/^1 found\. Examined all 3 records/).waitFor()
    await shot('people-search')
    await found.getByRole('button', { name: `Open visitor ${BOB}` }).click()
    await page.getByRole('article', { name: `visitor ${BOB}` }).getByRole('cell', { name: '"free"' }).waitFor()
  })

  it('previews who an unsaved segment matches, then saves it', async () => {
    await page.goto(`${beacon.url}/panel/audiences`)
    await page.getByRole('button', { name: 'New segment' }).click()
    await page.getByLabel('Segment name').fill('pro-plan')
    await page.getByLabel('Segment rule as JSON').fill(JSON.stringify({ fact: 'attribute.plan', op: 'eq', value: 'pro' }))
    await page.getByText('Visitors who', { exact: false }).first().waitFor()
    await page.getByRole('button', { name: 'Preview matches' }).click()
    const count = page.locator('.preview-count')
    await count.getByText(/^2 visitors match\. Examined all 3 records/).waitFor()
    const sample = page.getByRole('table', { name: 'Sample of matching visitors' })
    expect(await sample.locator('tbody tr td:first-child').allTextContents()).to.deep.equal([ANN, CAT])
    await shot('audiences-preview')
    expect((await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/segments`)).body.segments).to.deep.equal([])
    await page.getByLabel('Backfill from the event log').check()
    await page.getByRole('button', { name: 'Save segment' }).click()
    await page.locator('[data-segment="pro-plan"]').waitFor()
    // Saved with a backfill over the event log (docs/event-log.md, "Backfilling a segment").
    expect((await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/segments/pro-plan/backfill`)).status).to.equal(200)
  })

  it('fits a phone: the search results and the preview scroll inside their frame, the page no wider than the screen', async () => {
    await page.setViewportSize({ width: 390, height: 844 })
    await page.goto(`${beacon.url}/panel/people`)
    await page.getByRole('table', { name: 'Recently active visitors' }).waitFor()
    await page.getByRole('search', { name: 'Find people' }).getByLabel('Attribute').fill('plan')
    await page.getByRole('button', { name: 'Search', exact: true }).click()
    await page.getByRole('table', { name: 'People found' }).waitFor()
    expect(await page.evaluate('document.documentElement.scrollWidth')).to.be.at.most(390)
    await shot('people-phone')
    await page.goto(`${beacon.url}/panel/audiences`)
    await page.getByRole('button', { name: 'Edit pro-plan' }).click()
    await page.getByRole('button', { name: 'Preview matches' }).click()
    await page.getByRole('table', { name: 'Sample of matching visitors' }).waitFor()
    expect(await page.evaluate('document.documentElement.scrollWidth')).to.be.at.most(390)
    await shot('audiences-preview-phone')
  })
})
