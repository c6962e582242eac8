import { expect } from 'chai'
import { createRequire } from 'node:module'
import { gzipSync } from 'node:zlib'
import { startInProcess, type InProcess } from '../helpers/in-process.js'
import { SDK_CACHE } from '../../src/http/sdk-routes.js'

/** The SDK's budget, minified and gzipped (docs/sdk.md). */
const SDK_BYTES_MAX = 4096

describe('GET /sdk/beacon.js and /sdk/beacon.mjs', () => {
  let beacon: InProcess
  before(async () => { beacon = await startInProcess() })
  after(() => beacon.close())

  for (const name of ['beacon.js', 'beacon.mjs']) {
    it(`serves ${name} with an hour of caching, an ETag (then 304) and to any origin`, async () => {
      const res = await fetch(`${beacon.url}/sdk/${name}`)
      expect(res.status).to.equal(200)
      expect(res.headers.get('content-type')).to.equal('text/javascript; charset=utf-8')
      expect(res.headers.get('cache-control')).to.equal(SDK_CACHE)
      expect(res.headers.get('access-control-allow-origin')).to.equal('*')
      const etag = res.headers.get('etag')!
      expect(etag).to.match(/^"[A-Za-z0-9_-]+"$/)
      const text = await res.text()
      expect(text).to.include(name === 'beacon.js' ? 'globalThis.Beacon' : 'export')
      const again = await fetch(`${beacon.url}/sdk/${name}`, { headers: { 'if-none-match': etag } })
      expect(again.status).to.equal(304)
      expect(again.headers.get('etag')).to.equal(etag)
      expect(await again.text()).to.equal('')
    })

    it(`keeps ${name} within ${SDK_BYTES_MAX} bytes minified and gzipped`, async () => {
      const bytes = Buffer.from(await (await fetch(`${beacon.url}/sdk/${name}`)).arrayBuffer())
      expect(gzipSync(bytes, { level: 9 }).length).to.be.at.most(SDK_BYTES_MAX)
      // Minified: no indentation left.
      expect(bytes.toString()).to.not.match(/\n {2}/)
    })
  }
})

describe('the SDK from npm (package exports "beacon/sdk")', () => {
  it('resolves to the built ES module, which exports Beacon with every method', async () => {
    expect(createRequire(import.meta.url).resolve('beacon/sdk')).to.match(/\/dist\/web\/sdk\/beacon\.mjs$/)
    const sdk = await import('beacon/sdk' as string) as { Beacon: Record<string, unknown>, default: unknown }
    expect(sdk.default).to.equal(sdk.Beacon)
    expect(Object.keys(sdk.Beacon).sort()).to.deep.equal(['consent', 'flush', 'identify', 'init', 'onCampaigns', 'page', 'productView', 'purchase', 'track', 'visitorId'])
  })
})
