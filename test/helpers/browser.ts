// A real browser for the SDK and panel tests: Debian's chromium driven by playwright-core (never a
// downloaded browser), headless, with the flags this closed network needs, and a static file server
// on its own loopback origin for the pages a test serves (a shop page beside Beacon).

import { createServer, type Server } from 'node:http'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { chromium, type Browser, type Page } from 'playwright-core'

export const CHROMIUM = '/usr/bin/chromium'

/** Where tests save screenshots (git-ignored): look at them after a run. */
export const ARTIFACTS_DIR = new URL('../../.artifacts/', import.meta.url).pathname

export async function launchBrowser (): Promise<Browser> {
  return await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  })
}

/** The path of a screenshot file named `name` under the artifacts folder (created on demand). */
export function artifactPath (folder: string, name: string): string {
  const dir = join(ARTIFACTS_DIR, folder)
  mkdirSync(dir, { recursive: true })
  return join(dir, name)
}

/**
 * A page at 1280×900 signed in to the panel at `url` as `user` (the Campaigns page shown), with every
 * console error, script error, failed request and answer of 400 or above pushed to `problems` (a test
 * checks it is empty). A request the next navigation cancels (net::ERR_ABORTED: a page's fetch, left at
 * once for another page) is no failure.
 */
export async function signedInPanel (browser: Browser, url: string, user: { email: string, password: string }, problems: string[]): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
  context.setDefaultTimeout(15_000)
  const page = await context.newPage()
  page.on('console', message => { if (message.type() === 'error') problems.push(`console: ${message.text()}`) })
  page.on('pageerror', error => problems.push(`page error: ${error.message}`))
  page.on('requestfailed', request => {
    if (request.failure()?.errorText !== 'net::ERR_ABORTED') problems.push(`request failed: ${request.url()} (${request.failure()?.errorText})`)
  })
  page.on('response', response => { if (response.status() >= 400) problems.push(`${response.status()} for ${response.url()}`) })
  await page.goto(`${url}/panel/`)
  await page.getByLabel('Email').fill(user.email)
  await page.getByLabel('Password').fill(user.password)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.getByRole('heading', { level: 1, name: 'Campaigns' }).waitFor()
  return page
}

export interface PageServer {
  /** http://127.0.0.1:<port>, the page's origin. */
  origin: string
  close: () => Promise<void>
}

/** Serves `pages` (path → HTML or script text) on a random loopback port: the site that embeds Beacon. */
export async function servePages (pages: Record<string, string>): Promise<PageServer> {
  const server: Server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname
    const body = pages[path]
    if (body === undefined) { res.writeHead(404).end('not found'); return }
    const type = path.endsWith('.js') || path.endsWith('.mjs') ? 'text/javascript' : 'text/html; charset=utf-8'
    res.writeHead(200, { 'content-type': type, 'cache-control': 'no-store' }).end(body)
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('page server has no port')
  return {
    origin: `http://127.0.0.1:${address.port}`,
    close: async () => { server.closeAllConnections(); await new Promise<void>(resolve => server.close(() => resolve())) },
  }
}
