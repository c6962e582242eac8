import { expect } from 'chai'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { tempDir } from '../helpers/beacon.js'
import { CACHE_IMMUTABLE, loadStaticFiles, serveFile } from '../../src/http/static-files.js'
import type { Request } from '../../src/http/server.js'

const request = (ifNoneMatch: string): Request => ({
  method: 'get', url: '/x', params: [], authorization: '', query: '', origin: '', cookie: '', host: '', ifNoneMatch,
  forwardedProto: '', forwardedFor: '', userAgent: '', contentType: '', idempotencyKey: '', forwardedKey: '', remoteAddress: '', body: undefined,
})

describe('static files', () => {
  it('loads a folder with types and ETags, answers 304 to a matching If-None-Match', () => {
    const dir = tempDir()
    mkdirSync(join(dir, 'assets'))
    writeFileSync(join(dir, 'index.html'), '<p>hi</p>')
    writeFileSync(join(dir, 'assets', 'app-1a2b.js'), 'console.log(1)')
    const files = loadStaticFiles(dir)
    expect([...files.keys()].sort()).to.deep.equal(['assets/app-1a2b.js', 'index.html'])
    const js = files.get('assets/app-1a2b.js')!
    expect(js.contentType).to.equal('text/javascript; charset=utf-8')
    const fresh = serveFile(request(''), js, CACHE_IMMUTABLE)
    expect(fresh.status).to.equal(200)
    expect(fresh.headers).to.include({ ETag: js.etag, 'Cache-Control': CACHE_IMMUTABLE })
    expect(serveFile(request(`"other", W/${js.etag}`), js, CACHE_IMMUTABLE).status).to.equal(304)
    expect(serveFile(request('"other"'), js, CACHE_IMMUTABLE).status).to.equal(200)
    expect(files.get('index.html')!.etag).to.not.equal(js.etag)
  })

  it('is empty for a folder that does not exist', () => {
    expect(loadStaticFiles('/nonexistent-beacon-folder').size).to.equal(0)
  })
})
