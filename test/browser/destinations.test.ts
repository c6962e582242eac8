// The panel's Destinations page in a real browser against a real Beacon: an owner creates a meta-capi
// destination pointed at the Meta Conversions API double, sends a test event and reads Meta's answer,
// sees the exchange in the delivery log and the destination's health in the list.

import { expect } from 'chai'
import type { Browser, Page } from 'playwright-core'
import { admin, removeDir, startBeacon, type BeaconProcess } from '../helpers/beacon.js'
import { artifactPath, launchBrowser } from '../helpers/browser.js'
import { MetaCapiDouble } from '../destinations/doubles/meta-capi-double.js'

const OWNER = { email: 'owner@example.com', password: 'owner password 123' }

describe('panel: destinations in a browser', function () {
  this.timeout(180_000)
  let beacon: BeaconProcess
  let meta: MetaCapiDouble
  let browser: Browser
  let page: Page

  before(async () => {
    meta = await new MetaCapiDouble().start()
    beacon = await startBeacon({ env: { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' } })
    const account = (await admin(beacon.url, 'POST', '/admin/accounts', { name: 'Shoe shop' })).body.account as string
    expect((await admin(beacon.url, 'POST', `/admin/accounts/${account}/users`, { ...OWNER, name: 'Olive Owner', role: 'owner' })).status).to.equal(201)
    browser = await launchBrowser()
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
    context.setDefaultTimeout(15_000)
    page = await context.newPage()
  })
  after(async () => {
    await browser?.close()
    await beacon?.kill()
    if (beacon !== undefined) removeDir(beacon.dataDir)
    await meta?.close()
  })

  it('creates a meta-capi destination, sends a test event showing Meta\'s answer, and lists it as healthy', async () => {
    await page.goto(`${beacon.url}/panel`)
    await page.getByLabel('Email').fill(OWNER.email)
    await page.getByLabel('Password').fill(OWNER.password)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Destinations', exact: true }).click()
    await page.getByRole('heading', { level: 1, name: 'Destinations' }).waitFor()
    await page.getByRole('link', { name: 'New destination' }).click()
    await page.getByLabel('Type').selectOption('meta-capi')
    await page.getByLabel('Id', { exact: true }).fill('meta')
    await page.getByLabel('Name', { exact: true }).fill('Purchases to Meta')
    await page.getByLabel('Events').fill('purchase')
    await page.getByLabel('pixelId (required)').fill('1234567890')
    await page.getByLabel('apiBaseUrl').fill(meta.url)
    await page.getByLabel('testEventCode').fill('TEST42')
    await page.getByLabel('accessToken').fill('meta-token')
    await page.getByRole('button', { name: 'Save' }).click()
    await page.getByRole('button', { name: 'Send a test event' }).click()
    await page.getByRole('status').getByText('delivered').waitFor()
    await page.locator('.test-answer pre').getByText(/events_received.:1/).waitFor()
    expect(meta.testEventCodes).to.deep.equal(['TEST42'])
    await page.getByRole('cell', { name: 'delivered (200) · test' }).waitFor()
    await page.screenshot({ path: artifactPath('panel', 'destination.png'), fullPage: true })
    // The token is never shown back.
    expect(await page.content()).not.to.contain('meta-token')
    await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Destinations', exact: true }).click()
    await page.getByRole('cell', { name: 'ok' }).waitFor()
    await page.screenshot({ path: artifactPath('panel', 'destinations.png'), fullPage: true })
  })
})
