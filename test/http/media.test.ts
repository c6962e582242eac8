import { expect } from 'chai'
import { admin, ADMIN_KEY, createTenant, discardBeacon, startBeacon, type BeaconProcess, type Tenant } from '../helpers/beacon.js'
import { sniffImage } from '../../src/media/signature.js'
import { expectError } from '../helpers/errors.js'

/** The first bytes of real images of each kind (what their encoders write), padded to a plausible size. */
const IMAGES = {
  'image/png': Buffer.concat([Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489', 'hex'), Buffer.alloc(64)]),
  'image/jpeg': Buffer.concat([Buffer.from('ffd8ffe000104a46494600010100000100010000', 'hex'), Buffer.alloc(64)]),
  'image/gif': Buffer.concat([Buffer.from('GIF89a\x01\x00\x01\x00\x80\x00\x00', 'latin1'), Buffer.alloc(64)]),
  'image/webp': Buffer.concat([Buffer.from('RIFF'), Buffer.from([0x24, 0, 0, 0]), Buffer.from('WEBPVP8 '), Buffer.alloc(64)]),
} as const

async function upload (base: string, account: string, bytes: Buffer, name = 'banner.png', contentType = 'image/png'): Promise<{ status: number, body: any }> {
  const res = await fetch(`${base}/admin/accounts/${account}/media?name=${encodeURIComponent(name)}`, {
    method: 'POST', headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': contentType }, body: bytes,
  })
  return { status: res.status, body: await res.json() }
}

describe('media', () => {
  let beacon: BeaconProcess
  let a: Tenant

  before(async () => {
    beacon = await startBeacon({ env: { BEACON_MEDIA_MAX_BYTES: '4096' } })
    a = await createTenant(beacon.url, 'Media')
  })
  after(() => discardBeacon(beacon))

  it('accepts PNG, JPEG, GIF and WebP by their bytes, whatever the name and Content-Type', async () => {
    for (const [type, bytes] of Object.entries(IMAGES)) {
      const res = await upload(beacon.url, a.account, bytes, 'picture.bin', 'application/octet-stream')
      expect(res.status, type).to.equal(201)
      expect(res.body).to.include({ name: 'picture.bin', type, bytes: bytes.length })
      expect(res.body.url).to.equal(`/media/${a.account}/${res.body.id}`)
      expect(res.body.createdAt).to.be.a('string')
    }
  })

  it('refuses SVG, HTML, renamed text and an empty body with 415 media_type_unsupported, storing nothing', async () => {
    const before = (await admin(beacon.url, 'GET', `/admin/accounts/${a.account}/media`)).body.media.length
    for (const [name, bytes] of [
      ['logo.svg', Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>')],
      ['page.png', Buffer.from('<!doctype html><script>alert(1)</script>')],
      ['notes.jpg', Buffer.from('just some text renamed to .jpg')],
      ['riff.webp', Buffer.from('RIFF\x00\x00\x00\x00WAVEfmt ', 'latin1')],
      ['empty.png', Buffer.alloc(0)],
    ] as const) {
      const res = await upload(beacon.url, a.account, bytes, name, 'image/png')
      expect(res.status, name).to.equal(415)
      expect(res.body.errors[0].code, name).to.equal('media_type_unsupported')
    }
    expect((await admin(beacon.url, 'GET', `/admin/accounts/${a.account}/media`)).body.media.length).to.equal(before)
  })

  it('refuses an upload over BEACON_MEDIA_MAX_BYTES with 413 (JSON bodies keep their own limit)', async () => {
    const big = Buffer.concat([IMAGES['image/png'], Buffer.alloc(5000)])
    const res = await upload(beacon.url, a.account, big)
    expectError(res, 'body_too_large')
    expect(res.body.message).to.include('4096')
    expect((await upload(beacon.url, a.account, IMAGES['image/png'], 'a/b.png')).status).to.equal(400)
  })

  it('serves an image publicly with its type, immutable caching, ETag (304), nosniff and a CSP; lists and deletes', async () => {
    const created = (await upload(beacon.url, a.account, IMAGES['image/gif'], 'anim.gif')).body
    const res = await fetch(beacon.url + created.url)
    expect(res.status).to.equal(200)
    expect(res.headers.get('content-type')).to.equal('image/gif')
    expect(res.headers.get('cache-control')).to.equal('public, max-age=31536000, immutable')
    expect(res.headers.get('x-content-type-options')).to.equal('nosniff')
    expect(res.headers.get('content-security-policy')).to.equal('default-src \'none\'; img-src \'self\'')
    expect(Buffer.from(await res.arrayBuffer()).equals(IMAGES['image/gif'])).to.equal(true)
    const etag = res.headers.get('etag')!
    expect(etag).to.match(/^"[A-Za-z0-9_-]{27}"$/)
    const again = await fetch(beacon.url + created.url, { headers: { 'if-none-match': etag } })
    expect(again.status).to.equal(304)
    expect(again.headers.get('etag')).to.equal(etag)
    const listed = (await admin(beacon.url, 'GET', `/admin/accounts/${a.account}/media`)).body.media
    expect(listed.find((m: { id: string }) => m.id === created.id)).to.deep.equal(created)
    expect((await admin(beacon.url, 'DELETE', `/admin/accounts/${a.account}/media/${created.id}`)).status).to.equal(204)
    expect((await fetch(beacon.url + created.url)).status).to.equal(404)
    const twice = await admin(beacon.url, 'DELETE', `/admin/accounts/${a.account}/media/${created.id}`)
    expectError(twice, 'media_not_found')
    // Another account's path does not reach this account's images.
    const kept = (await upload(beacon.url, a.account, IMAGES['image/png'])).body
    const b = await createTenant(beacon.url, 'Other')
    expect((await fetch(`${beacon.url}/media/${b.account}/${kept.id}`)).status).to.equal(404)
  })

  it('tells the kinds apart from their first bytes only', () => {
    for (const [type, bytes] of Object.entries(IMAGES)) expect(sniffImage(bytes)).to.equal(type)
    expect(sniffImage(Buffer.from('GIF8'))).to.equal(null)
    expect(sniffImage(Buffer.from([0xff, 0xd8]))).to.equal(null)
  })
})
