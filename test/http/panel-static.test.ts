import { expect } from 'chai'
import { readdirSync } from 'node:fs'
import { discardBeacon, startBeacon, type BeaconProcess } from '../helpers/beacon.js'
import { PANEL_DIR } from '../../src/http/panel-routes.js'

// The panel as the built server serves it (npm run build first: npm test does).
describe('panel static files', () => {
  let beacon: BeaconProcess
  const assets = readdirSync(`${PANEL_DIR}assets`)
  const script = assets.find(name => /^app-[A-Z0-9]+\.js$/.test(name))!
  const style = assets.find(name => /^app-[A-Z0-9]+\.css$/.test(name))!

  before(async () => { beacon = await startBeacon() })
  after(() => discardBeacon(beacon))

  const get = (path: string, headers: Record<string, string> = {}): Promise<Response> => fetch(beacon.url + path, { headers, redirect: 'manual' })

  it('redirects /panel to /panel/ (301)', async () => {
    const res = await get('/panel')
    expect(res.status).to.equal(301)
    expect(res.headers.get('location')).to.equal('/panel/')
  })

  it('answers index.html at /panel/ with an ETag, revalidated caching and the security headers, naming the hashed assets', async () => {
    const res = await get('/panel/')
    expect(res.status).to.equal(200)
    expect(res.headers.get('content-type')).to.equal('text/html; charset=utf-8')
    expect(res.headers.get('cache-control')).to.equal('no-cache')
    expect(res.headers.get('etag')).to.match(/^"[A-Za-z0-9_-]+"$/)
    const csp = res.headers.get('content-security-policy')!
    expect(csp).to.include("default-src 'self'").and.include("script-src 'self'").and.include("frame-ancestors 'none'")
    expect(csp).not.to.include('unsafe-inline')
    expect(res.headers.get('x-frame-options')).to.equal('DENY')
    expect(res.headers.get('referrer-policy')).to.equal('no-referrer')
    expect(res.headers.get('x-content-type-options')).to.equal('nosniff')
    const html = await res.text()
    expect(html).to.include(`<script type="module" src="/panel/assets/${script}"></script>`)
    expect(html).to.include(`<link rel="stylesheet" href="/panel/assets/${style}">`)
    expect(html).not.to.match(/<script>|<script(?![^>]*src=)[^>]*>/)
  })

  it('answers 304 to a request holding the same ETag, for the index and for assets', async () => {
    for (const path of ['/panel/', `/panel/assets/${script}`]) {
      const first = await get(path)
      const etag = first.headers.get('etag')!
      const again = await get(path, { 'if-none-match': etag })
      expect(again.status, path).to.equal(304)
      expect(await again.text()).to.equal('')
      expect(again.headers.get('etag')).to.equal(etag)
      const weak = await get(path, { 'if-none-match': `"other", W/${etag}` })
      expect(weak.status, path).to.equal(304)
      const changed = await get(path, { 'if-none-match': '"other"' })
      expect(changed.status, path).to.equal(200)
    }
  })

  it('caches the hashed assets for a year as immutable, with their types', async () => {
    const js = await get(`/panel/assets/${script}`)
    expect(js.status).to.equal(200)
    expect(js.headers.get('cache-control')).to.equal('public, max-age=31536000, immutable')
    expect(js.headers.get('content-type')).to.equal('text/javascript; charset=utf-8')
    const css = await get(`/panel/assets/${style}`)
    expect(css.headers.get('content-type')).to.equal('text/css; charset=utf-8')
    expect(css.headers.get('cache-control')).to.equal('public, max-age=31536000, immutable')
  })

  it('answers index.html for client-side routes, and 404 for unknown assets', async () => {
    const index = await (await get('/panel/')).text()
    for (const path of ['/panel/campaigns', '/panel/campaigns/summer-shoes', '/panel/webhooks/crm/']) {
      const res = await get(path)
      expect(res.status, path).to.equal(200)
      expect(res.headers.get('cache-control')).to.equal('no-cache')
      expect(await res.text()).to.equal(index)
    }
    const missing = await get('/panel/assets/app-MISSING.js')
    expect(missing.status).to.equal(404)
    expect(((await missing.json()) as { errors: { code: string }[] }).errors[0]!.code).to.equal('not_found')
  })
})
