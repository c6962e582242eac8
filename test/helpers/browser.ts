// A real browser for the SDK and panel tests: Debian's chromium driven by playwright-core (never a
// downloaded browser), headless, with the flags this closed network needs, and a static file server
// on its own loopback origin for the pages a test serves (a shop page beside Beacon).

import { createServer, type Server } from 'node:http'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { chromium, type Browser } from 'playwright-core'

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
