// Transport: requests broken below the JSON, at the HTTP framing (bodies shorter than their
// Content-Length, a connection reset mid-body, bad or conflicting Content-Length and Transfer-Encoding,
// a chunked body cut inside a chunk), sent byte for byte over node:net because fetch will not send them.
// Each must get no answer or a 4xx, never a 2xx or 5xx; afterwards the seeded state is unchanged and
// the process healthy, serving, and able to stop gracefully (no request left in flight). The malformed
// requests fetch can send are the case table of test/http/bad-input.test.ts.

import { expect } from 'chai'
import net from 'node:net'
import { ADMIN_KEY, createTenant, removeDir, startBeacon, visitorId, type BeaconProcess } from '../helpers/beacon.js'
import { BASE, baseText, EPS, padded, PATH, type Seed } from './bad-input-cases.js'

let beacon: BeaconProcess
let c: Seed

// Raw HTTP over node:net, for requests fetch will not send (a body shorter than its Content-Length).

interface RawOutcome {
  data: string
  timedOut: boolean
}

function rawHttp (request: string, ending: 'end' | 'destroy'): Promise<RawOutcome> {
  return new Promise(resolve => {
    let data = ''
    let settled = false
    const socket = net.connect(beacon.port, '127.0.0.1')
    const done = (timedOut: boolean): void => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      socket.destroy()
      resolve({ data, timedOut })
    }
    const timer = setTimeout(() => done(true), 5_000)
    socket.setEncoding('latin1')
    socket.on('data', (chunk: string) => { data += chunk })
    socket.on('close', () => done(false))
    socket.on('error', () => done(false))
    socket.on('connect', () => {
      socket.write(request, 'latin1', () => {
        if (ending === 'end') socket.end()
        else setTimeout(() => done(false), 50)
      })
    })
  })
}

async function post (path: string, body: unknown): Promise<{ status: number, text: string }> {
  const res = await fetch(beacon.url + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
  return { status: res.status, text: await res.text() }
}

describe('transport: broken framing', function () {
  const reads = (): Promise<string[]> => Promise.all([post(PATH.vq, BASE.vq(c)), post(PATH.pq, BASE.pq(c))].map(async answer => JSON.stringify(await answer)))
  let baseline: string[] = []

  before(async function () {
    this.timeout(30_000)
    beacon = await startBeacon()
    const tenant = await createTenant(beacon.url, 'Transport site')
    c = { account: tenant.account, token: tenant.token, visitorId: visitorId(), profileId: 'seed.user+1@example.com' }
    for (const [path, body] of [
      [PATH.va, { ...BASE.va(c), attributes: { color: 'blue', tags: ['a', 'b'] } }],
      [PATH.pa, { ...BASE.pa(c), attributes: { color: 'red', plan: 'pro' } }],
    ] as const) {
      const answer = await post(path, body)
      if (answer.status !== 200) throw new Error(`seeding failed (${path}): ${answer.status} ${answer.text}`)
    }
    baseline = await reads()
  })

  after(async () => {
    if (beacon === undefined) return
    await beacon.kill()
    removeDir(beacon.dataDir)
  })

  // Bodies shorter than their Content-Length, and broken framing: no answer or a 4xx, never 2xx/5xx.
  const head = (path: string, extra: string): string => `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n${extra}\r\n`
  const RAW: [string, (c: Seed) => string, 'end' | 'destroy'][] = [
    ...EPS.map((ep): [string, (c: Seed) => string, 'end' | 'destroy'] => [`POST ${PATH[ep]}: Content-Length 1000, 20 bytes sent, then FIN`, c => head(PATH[ep], 'Content-Length: 1000\r\n') + baseText(ep, c).slice(0, 20), 'end']),
    ['POST /visitors/attributes: Content-Length 65536, 30,000 bytes sent, then RST', c => head(PATH.va, 'Content-Length: 65536\r\n') + padded('va', c, 30_000), 'destroy'],
    ['POST /admin/accounts: Content-Length 500, 12 bytes sent, then FIN', () => head('/admin/accounts', `Authorization: Bearer ${ADMIN_KEY}\r\nContent-Length: 500\r\n`) + '{"name":"x"}', 'end'],
    ['POST /campaigns/query: Content-Length 70000 (over the limit), 100 bytes sent, then FIN', c => head(PATH.event, 'Content-Length: 70000\r\n') + baseText('event', c).slice(0, 100), 'end'],
    ['POST /profiles/query: a chunked body cut inside a chunk, then FIN', c => head(PATH.pq, 'Transfer-Encoding: chunked\r\n') + 'ff\r\n' + baseText('pq', c).slice(0, 30), 'end'],
    ['POST /campaigns/query: Content-Length -1', c => head(PATH.event, 'Content-Length: -1\r\n') + baseText('event', c), 'end'],
    ['POST /campaigns/query: Content-Length "abc"', c => head(PATH.event, 'Content-Length: abc\r\n') + baseText('event', c), 'end'],
    ['POST /campaigns/query: Content-Length 99999999999999999999', c => head(PATH.event, 'Content-Length: 99999999999999999999\r\n') + baseText('event', c), 'end'],
    ['POST /campaigns/query: two different Content-Lengths', c => head(PATH.event, 'Content-Length: 10\r\nContent-Length: 20\r\n') + baseText('event', c), 'end'],
    ['POST /campaigns/query: both Content-Length and Transfer-Encoding', c => head(PATH.event, 'Content-Length: 5\r\nTransfer-Encoding: chunked\r\n') + `${Buffer.byteLength(baseText('event', c)).toString(16)}\r\n${baseText('event', c)}\r\n0\r\n\r\n`, 'end'],
    ['POST /campaigns/query: a chunk size that is not hex', c => head(PATH.event, 'Transfer-Encoding: chunked\r\n') + `zz\r\n${baseText('event', c)}\r\n0\r\n\r\n`, 'end'],
  ]
  for (const [what, request, ending] of RAW) {
    it(`${what} → connection closed or a 4xx, never 2xx/5xx`, async () => {
      const outcome = await rawHttp(request(c), ending)
      expect(outcome.timedOut, 'the server neither answered nor closed within 5 s').to.equal(false)
      if (outcome.data !== '') expect(outcome.data.split('\r\n')[0]).to.match(/^HTTP\/1\.1 4\d\d /)
    })
  }

  it('leaves the seeded visitor and profile unchanged, and still serves: /healthz, a valid event, nothing logged as an error', async () => {
    expect(await reads()).to.deep.equal(baseline)
    expect(beacon.child.exitCode, 'exit code').to.equal(null)
    const health = await fetch(beacon.url + '/healthz')
    expect(health.status).to.equal(200)
    const event = await post(PATH.event, { ...BASE.event(c), visitorId: visitorId() })
    expect(event.status, event.text).to.equal(200)
    const failures = beacon.output().split('\n').filter(line => /"level":(50|60)/.test(line))
    expect(failures, 'error/fatal log lines').to.deep.equal([])
  })

  it('still stops gracefully on SIGTERM within 5 s (no request left in flight by cut bodies)', async function () {
    this.timeout(15_000)
    const code = await Promise.race([beacon.stop(), new Promise<string>(resolve => setTimeout(() => resolve('timeout'), 5_000))])
    expect(beacon.output(), 'log of a completed drain').to.include('"msg":"beacon stopped"')
    expect(code).to.equal(0)
  })
})
