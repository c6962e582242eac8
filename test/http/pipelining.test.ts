// Pipelined requests (HTTP/1.1: a request written before the answer to the one ahead of it), over
// node:net because fetch never pipelines. uWebSockets.js answers a pipelined request only when the one
// ahead was answered inside its handler; otherwise it closes the connection before any handler sees the
// second. Beacon runs a request whose body was read at the end of the event loop's turn, so requests
// written together are refused together: none takes effect, and their retries count once each
// (docs/retries-and-limits.md, "Pipelined requests").

import { expect } from 'chai'
import net from 'node:net'
import { ADMIN_KEY, removeDir, startWithTenant, visitorId, type BeaconProcess, type Tenant } from '../helpers/beacon.js'

let beacon: BeaconProcess
let tenant: Tenant

interface Exchanged {
  data: string
  closed: boolean
}

/** Writes `text` in one write; resolves with what came back once the server closed, or after `waitMs`. */
function exchange (text: string, waitMs: number): Promise<Exchanged> {
  return new Promise(resolve => {
    let data = ''
    const socket = net.connect(beacon.port, '127.0.0.1')
    const done = (closed: boolean): void => {
      clearTimeout(timer)
      socket.destroy()
      resolve({ data, closed })
    }
    const timer = setTimeout(() => done(false), waitMs)
    socket.setEncoding('latin1')
    socket.on('data', (chunk: string) => { data += chunk })
    socket.on('close', () => done(true))
    socket.on('error', () => done(true))
    socket.on('connect', () => socket.write(text, 'latin1'))
  })
}

const post = (path: string, body: string): string =>
  `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
const get = (path: string): string => `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`
/** The status lines of the answers in `data` (an answer's body runs into the next one's status line). */
const statusLines = (data: string): string[] => data.match(/HTTP\/1\.1 \d{3} [^\r]*/g) ?? []

async function loggedPaths (visitor: string): Promise<string[]> {
  const res = await fetch(`${beacon.url}/admin/accounts/${tenant.account}/events?visitorId=${visitor}`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } })
  expect(res.status).to.equal(200)
  const page = await res.json() as { events: { fields: { path?: string } }[] }
  return page.events.map(event => event.fields.path ?? '').sort()
}

describe('http: pipelined requests', function () {
  before(async function () {
    this.timeout(30_000);
    ({ beacon, tenant } = await startWithTenant())
  })

  after(async () => {
    if (beacon === undefined) return
    await beacon.kill()
    removeDir(beacon.dataDir)
  })

  it('two POST /campaigns/query in one write: the connection closes unanswered, neither is applied, and each sent again counts once', async () => {
    const visitor = visitorId()
    const bodies = ['/first', '/second'].map(path => JSON.stringify({ account: tenant.account, visitorId: visitor, platform: 'web', event: 'pageView', path }))
    const outcome = await exchange(post('/campaigns/query', bodies[0]!) + post('/campaigns/query', bodies[1]!), 5_000)
    expect(outcome.closed, 'the server closes the connection').to.equal(true)
    expect(outcome.data).to.equal('')
    // The retries go to the visitor's actor behind anything the pipelined pair had started.
    for (const body of bodies) {
      const res = await fetch(`${beacon.url}/campaigns/query`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
      expect(res.status, await res.text()).to.equal(200)
    }
    expect(await loggedPaths(visitor)).to.deep.equal(['/first', '/second'])
  })

  it('a POST /visitors/attributes with GET /healthz behind it: closed unanswered, the attribute not written', async () => {
    const visitor = visitorId()
    const write = JSON.stringify({ account: tenant.account, token: tenant.token, visitorId: visitor, attributes: { color: 'green' } })
    const outcome = await exchange(post('/visitors/attributes', write) + get('/healthz'), 5_000)
    expect(outcome).to.deep.equal({ data: '', closed: true })
    const read = await fetch(`${beacon.url}/visitors/query`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ account: tenant.account, token: tenant.token, visitorId: visitor }) })
    const answer = await read.json() as { attributes?: Record<string, unknown> }
    expect(read.status, JSON.stringify(answer)).to.equal(200)
    expect(answer.attributes ?? {}).to.not.have.property('color')
  })

  it('two GET /healthz in one write (answered inside their handler): both answered, in order, the connection kept', async () => {
    const outcome = await exchange(get('/healthz') + get('/healthz?second'), 500)
    expect(outcome.closed, 'the connection stays open').to.equal(false)
    expect(statusLines(outcome.data)).to.deep.equal(['HTTP/1.1 200 OK', 'HTTP/1.1 200 OK'])
  })
})
