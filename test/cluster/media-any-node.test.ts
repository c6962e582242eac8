// Media in cluster mode, real processes: a 3-server NATS JetStream cluster (R3) and 3 Beacon nodes
// (test/helpers/beacon-cluster.ts). An image uploaded through one node is listed and served
// byte-identical (same ETag, 304 on If-None-Match) through the others; a deletion through any node makes
// it 404 through every node within a second; the per-account limit holds across nodes under concurrent
// uploads; an image outlives a SIGKILL of the node it came through (its bytes are on JetStream); an
// account's deletion deletes its images from the cluster's bucket; with NATS short of a quorum an upload
// is 503 unavailable with Retry-After, never 500. Timings are printed, never asserted.

import { expect } from 'chai'
import { randomBytes } from 'node:crypto'
import { connect } from '@nats-io/transport-node'
import { Objm } from '@nats-io/obj'
import { admin, ADMIN_KEY, createTenant } from '../helpers/beacon.js'
import { startBeaconCluster, type BeaconCluster } from '../helpers/beacon-cluster.js'
import { until } from '../helpers/until.js'

/** Images an account may hold in this cluster (BEACON_MEDIA_PER_ACCOUNT_MAX). */
const LIMIT = 5
const PNG_SIGNATURE = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex')

/** A PNG-typed body of `size` bytes (the signature, then random bytes: each image differs). */
function image (size: number): Buffer {
  return Buffer.concat([PNG_SIGNATURE, randomBytes(size - PNG_SIGNATURE.length)])
}

async function upload (base: string, account: string, bytes: Buffer, name = 'banner.png'): Promise<{ status: number, headers: Headers, body: any }> {
  const res = await fetch(`${base}/admin/accounts/${account}/media?name=${encodeURIComponent(name)}`, {
    method: 'POST', headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'image/png' }, body: bytes,
  })
  return { status: res.status, headers: res.headers, body: await res.json() }
}

describe('Beacon cluster mode: media from any node (3 nodes, real processes)', function () {
  this.timeout(120_000)
  let cluster: BeaconCluster

  before(async () => {
    cluster = await startBeaconCluster(3, { BEACON_MEDIA_PER_ACCOUNT_MAX: String(LIMIT) })
    await cluster.settled()
  })
  after(async () => {
    await cluster?.close()
  })

  const node = (i: number): string => cluster.members[i]!.url
  const account = (): string => cluster.tenant.account
  const listed = async (base: string, of = account()): Promise<Array<{ id: string }>> => {
    const res = await admin(base, 'GET', `/admin/accounts/${of}/media`)
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
    return res.body.media
  }

  it('lists and serves an image uploaded through node 1 through nodes 2 and 3, byte-identical, with its ETag; deleted through node 3, 404 everywhere within 1 s', async () => {
    const bytes = image(1_500_000)
    const startedMs = Date.now()
    const created = await upload(node(0), account(), bytes, 'hero.png')
    console.log(`      1.5 MB upload through node-1: ${Date.now() - startedMs} ms`)
    expect(created.status, JSON.stringify(created.body)).to.equal(201)
    const { id, url } = created.body as { id: string, url: string }
    const etag = (await fetch(node(0) + url)).headers.get('etag')
    expect(etag).to.match(/^"[A-Za-z0-9_-]{27}"$/)
    for (const i of [1, 2]) {
      expect((await listed(node(i))).find(m => m.id === id), `listed through node-${i + 1}`).to.deep.equal(created.body)
      for (const round of ['first read (from JetStream)', 'second read (the local copy)']) {
        const readMs = Date.now()
        const res = await fetch(node(i) + url)
        const body = Buffer.from(await res.arrayBuffer())
        console.log(`      node-${i + 1} ${round}: ${Date.now() - readMs} ms`)
        expect(res.status, `node-${i + 1}`).to.equal(200)
        expect(res.headers.get('content-type')).to.equal('image/png')
        expect(res.headers.get('cache-control')).to.equal('public, max-age=31536000, immutable')
        expect(res.headers.get('etag'), `node-${i + 1} ETag`).to.equal(etag)
        expect(body.equals(bytes), `node-${i + 1} bytes`).to.equal(true)
      }
      expect((await fetch(node(i) + url, { headers: { 'if-none-match': etag! } })).status, `node-${i + 1} 304`).to.equal(304)
    }

    const deleted = await admin(node(2), 'DELETE', `/admin/accounts/${account()}/media/${id}`)
    expect(deleted.status, JSON.stringify(deleted.body)).to.equal(204)
    const deletedMs = Date.now()
    expect((await fetch(node(2) + url)).status, 'node-3 at once').to.equal(404)
    for (const i of [0, 1]) {
      await until(`the image 404 through node-${i + 1}`, async () => (await fetch(node(i) + url)).status === 404, 1_000, 5)
      console.log(`      404 through node-${i + 1} ${Date.now() - deletedMs} ms after the delete's answer`)
      expect((await listed(node(i))).find(m => m.id === id), `node-${i + 1} lists it no more`).to.equal(undefined)
    }
    expect((await admin(node(0), 'DELETE', `/admin/accounts/${account()}/media/${id}`)).status, 'deleted twice').to.equal(404)
  })

  it(`holds the per-account limit (${LIMIT}) across nodes under concurrent uploads`, async () => {
    expect(await listed(node(0))).to.have.length(0)
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => upload(node(i % 3), account(), image(2000), `img-${i}.png`)))
    const statuses = answers.map(answer => answer.status).sort()
    expect(statuses, JSON.stringify(answers.filter(a => a.status !== 201 && a.status !== 409).map(a => a.body))).to.deep.equal([...Array(LIMIT).fill(201), ...Array(12 - LIMIT).fill(409)])
    for (const answer of answers.filter(a => a.status === 409)) expect(answer.body.errors[0].code).to.equal('conflict')
    const ids = answers.filter(a => a.status === 201).map(a => a.body.id as string).sort()
    for (const i of [0, 1, 2]) expect((await listed(node(i))).map(m => m.id).sort(), `node-${i + 1} lists`).to.deep.equal(ids)
    // One deleted through node 2 frees one place, through every node.
    expect((await admin(node(1), 'DELETE', `/admin/accounts/${account()}/media/${ids[0]!}`)).status).to.equal(204)
    expect((await upload(node(2), account(), image(2000))).status).to.equal(201)
    expect((await upload(node(0), account(), image(2000))).status).to.equal(409)
  })

  it('keeps an image uploaded through node 1 after node 1 is SIGKILLed (served through nodes 2 and 3)', async () => {
    const other = await createTenant(node(0), 'Media survivor')
    const bytes = image(1_500_000)
    const created = await upload(node(0), other.account, bytes, 'kept.png')
    expect(created.status, JSON.stringify(created.body)).to.equal(201)
    await cluster.kill(0)
    for (const i of [1, 2]) {
      const res = await fetch(node(i) + (created.body.url as string))
      expect(res.status, `node-${i + 1}`).to.equal(200)
      expect(Buffer.from(await res.arrayBuffer()).equals(bytes), `node-${i + 1} bytes`).to.equal(true)
      expect((await listed(node(i), other.account)).map(m => m.id)).to.deep.equal([created.body.id])
    }
  })

  it('deletes an account\'s images from the cluster\'s bucket when the account is deleted', async () => {
    const gone = await createTenant(node(1), 'Media deleted')
    for (const i of [1, 2]) expect((await upload(node(i), gone.account, image(3000))).status).to.equal(201)
    expect((await admin(node(2), 'DELETE', `/admin/accounts/${gone.account}`)).status).to.be.oneOf([200, 202])
    const nc = await connect({ servers: cluster.nats.urls })
    try {
      const bucket = await new Objm(nc).open(`BEACON_MEDIA_${cluster.name}`)
      const live = async (): Promise<number> => (await bucket.list()).filter(info => info.name.startsWith(`${gone.account}/`) && !info.deleted).length
      await until('the deleted account\'s images gone from the bucket', async () => await live() === 0, 15_000, 50)
      // Another account's images stay.
      expect((await bucket.list()).filter(info => info.name.startsWith(`${account()}/`)).length).to.equal(LIMIT)
    } finally {
      await nc.close()
    }
  })

  it('answers an upload 503 unavailable with Retry-After: 1 while NATS has no quorum, never 500', async () => {
    await Promise.all([cluster.nats.servers[0]!.kill(), cluster.nats.servers[1]!.kill()])
    const answer = await upload(node(2), account(), image(2000))
    expect(answer.status, JSON.stringify(answer.body)).to.equal(503)
    expect(answer.body.errors[0].code).to.equal('unavailable')
    expect(answer.headers.get('retry-after')).to.equal('1')
  })
})
