// The panel's Report builder page (saved reports) in Chromium against a real Beacon: a report built in the form and
// previewed (chart and exact totals) before it is saved, saved, opened again from the list, filtered,
// and downloaded as CSV. Any console error (a failed request included) or script error fails the test;
// at phone width (390 px) the page stays within the screen. Screenshots under .artifacts/saved-reports/.

import { expect } from 'chai'
import type { Browser, Page } from 'playwright-core'
import { admin, createTenant, post, removeDir, startBeacon, visitorId, type BeaconProcess, type Tenant } from '../helpers/beacon.js'
import { artifactPath, launchBrowser, signedInPanel } from '../helpers/browser.js'

const OWNER = { email: 'olive@example.com', password: 'owner password 123' }

describe('panel in a browser: saved reports', function () {
  this.timeout(120_000)
  let beacon: BeaconProcess
  let tenant: Tenant
  let browser: Browser
  let page: Page
  const problems: string[] = []
  const shot = (name: string): Promise<Buffer> => page.screenshot({ path: artifactPath('saved-reports', `${name}.png`), fullPage: true })
  const totals = async (): Promise<string[][]> => {
    const table = page.getByRole('table', { name: 'Totals over the range' })
    await table.waitFor()
    return await table.locator('tbody tr').evaluateAll(rows => rows.map(row => [...row.querySelectorAll('td')].map(td => td.textContent ?? '')))
  }

  before(async () => {
    beacon = await startBeacon()
    tenant = await createTenant(beacon.url, 'Shoe shop')
    const user = await admin(beacon.url, 'POST', `/admin/accounts/${tenant.account}/users`, { ...OWNER, role: 'owner' })
    expect(user.status, JSON.stringify(user.body)).to.equal(201)
    const [ann, bob, cat] = [visitorId(), visitorId(), visitorId()]
    for (const [visitor, platform, event] of [[ann, 'web', 'pageView'], [ann, 'web', 'pageView'], [bob, 'web', 'pageView'], [cat, 'ios', 'pageView'], [cat, 'ios', 'productView']]) {
      const res = await post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: visitor, platform, event, ...(event === 'productView' ? { sku: 's-1' } : {}) })
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
    }
    browser = await launchBrowser()
    page = await signedInPanel(browser, beacon.url, OWNER, problems)
  })
  after(async () => {
    await browser?.close()
    await beacon?.kill()
    if (beacon !== undefined) removeDir(beacon.dataDir)
  })
  afterEach(() => { expect(problems).to.deep.equal([]) })

  it('builds and previews a report (chart and exact totals), then saves it', async () => {
    await page.goto(`${beacon.url}/panel/saved-reports`)
    await page.getByRole('heading', { level: 1, name: 'Report builder' }).waitFor()
    await page.getByText('No saved report yet.').waitFor()
    await page.getByLabel('Name', { exact: true }).fill('Visitors by platform')
    await page.getByLabel('Metric', { exact: true }).selectOption('uniqueVisitors')
    await page.getByLabel('Breakdown', { exact: true }).selectOption('platform')
    await page.getByRole('button', { name: 'Preview' }).click()
    expect(await totals()).to.deep.equal([['web', '2'], ['ios', '1']])
    await page.getByRole('img', { name: /^Unique visitors: web 2, ios 1$/ }).waitFor()
    await shot('preview')
    expect((await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/saved-reports`)).body.savedReports).to.deep.equal([])
    await page.getByRole('button', { name: 'Save report' }).click()
    await page.getByText('Saved Visitors by platform.').waitFor()
    await page.getByRole('button', { name: 'Open Visitors by platform' }).waitFor()
    const saved = (await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/saved-reports`)).body.savedReports
    expect(saved).to.have.length(1)
    expect(saved[0]).to.deep.include({ name: 'Visitors by platform', metric: { type: 'uniqueVisitors' }, breakdown: { by: 'platform' }, granularity: 'day' })
  })

  it('opens a saved report, adds a filter, saves the change and downloads the CSV', async () => {
    await page.getByRole('button', { name: 'New report' }).click()
    await page.getByRole('heading', { name: 'Build a report' }).waitFor()
    await page.getByRole('button', { name: 'Open Visitors by platform' }).click()
    await page.getByRole('heading', { name: 'Edit Visitors by platform' }).waitFor()
    expect(await totals()).to.deep.equal([['web', '2'], ['ios', '1']])
    await page.getByRole('button', { name: 'Add a filter' }).click()
    await page.getByLabel('Filter 1 by').selectOption('kind')
    await page.getByLabel('Filter 1 values').fill('productView')
    await page.getByRole('button', { name: 'Preview' }).click()
    await page.getByRole('table', { name: 'Totals over the range' }).getByRole('cell', { name: 'ios' }).waitFor()
    expect(await totals()).to.deep.equal([['ios', '1']])
    await page.getByRole('button', { name: 'Save changes' }).click()
    await page.getByText('Saved Visitors by platform.').waitFor()
    const href = await page.getByRole('link', { name: 'Download CSV' }).getAttribute('href')
    const csv = await page.evaluate(async (url: string) => { const res = await fetch(url); return `${res.status} ${res.headers.get('content-type') ?? ''}\n${await res.text()}` }, href!)
    const [status, ...lines] = csv.split('\n')
    expect(status).to.equal('200 text/csv; charset=utf-8')
    expect(lines[0]).to.equal('bucket,group,value\r')
    expect(lines.filter(line => line.includes(',ios,1'))).to.have.length(1)
  })

  it('fits a phone: the builder, chart and totals within the screen', async () => {
    await page.setViewportSize({ width: 390, height: 844 })
    await page.goto(`${beacon.url}/panel/saved-reports`)
    await page.getByRole('button', { name: 'Open Visitors by platform' }).click()
    await page.getByRole('table', { name: 'Totals over the range' }).waitFor()
    expect(await page.evaluate('document.documentElement.scrollWidth')).to.be.at.most(390)
    await shot('phone')
  })
})
