// Bad input: one Beacon process, a known seeded state, then the case table of malformed requests
// (test/http/bad-input-cases.ts) against the seven public endpoints and the admin API, sent over real
// HTTP (chunked and stalled bodies included). Every case asserts the exact status, the stable error
// code and the error body shape; at the end the seeded state must be byte-for-byte what it was, and
// the process must still be alive, healthy and able to stop gracefully. Broken framing below HTTP is
// test/http/transport.test.ts.

import { expect } from 'chai'
import { ERRORS, type ErrorCode } from '../../src/errors.js'
import { ADMIN_KEY, admin, createTenant, createToken, identified, removeDir, startBeacon, visitorId, type BeaconProcess } from '../helpers/beacon.js'
import { cases, tokenId, UNKNOWN_ACCOUNT, type Case, type Ctx } from './bad-input-cases.js'

let beacon: BeaconProcess
let c: Ctx

// ---------------------------------------------------------------------------------------------------
// Sending

interface Answer {
  status: number
  headers: Headers
  text: string
}

function fill (path: string): string {
  return path
    .replaceAll('{account}', c.account)
    .replaceAll('{other}', c.other)
    .replaceAll('{unknown}', UNKNOWN_ACCOUNT)
    .replaceAll('{otherTokenId}', c.otherTokenId)
}

function describeError (error: unknown): string {
  const e = error as { message?: string, cause?: { code?: string, message?: string } }
  return `${e.message ?? String(error)}${e.cause === undefined ? '' : ` (${e.cause.code ?? e.cause.message ?? ''})`}`
}

/** A body as a stream of 1,000-byte chunks; with `stall`, the stream pauses after the last one until released. */
function streamOf (bytes: Uint8Array, stall: Promise<void> | null): ReadableStream<Uint8Array> {
  let offset = 0
  return new ReadableStream<Uint8Array>({
    async pull (controller) {
      if (offset < bytes.byteLength) {
        controller.enqueue(bytes.subarray(offset, offset + 1000))
        offset += 1000
        return
      }
      if (stall !== null) await stall
      controller.close()
    },
  })
}

async function send (k: Case): Promise<Answer> {
  const headers: Record<string, string> = {}
  let body: Uint8Array | undefined
  if (k.raw !== undefined) {
    const raw = k.raw(c)
    body = typeof raw === 'string' ? Buffer.from(raw, 'utf8') : raw
  } else if (k.body !== undefined) {
    body = Buffer.from(JSON.stringify(k.body(c)), 'utf8')
  }
  const contentType = k.contentType === undefined ? 'application/json' : k.contentType
  if (body !== undefined && contentType !== null) headers['content-type'] = contentType
  const auth = k.auth === undefined ? (k.path.startsWith('/admin') ? `Bearer ${ADMIN_KEY}` : null) : k.auth
  if (auth !== null) headers.authorization = auth
  const url = c.url + fill(k.path)

  if (k.transport === undefined) {
    try {
      const res = await fetch(url, { method: k.method, headers, ...(body === undefined ? {} : { body }), signal: AbortSignal.timeout(10_000) })
      return { status: res.status, headers: res.headers, text: await res.text() }
    } catch (error) {
      throw new Error(`no HTTP answer to ${k.method} ${k.path}: ${describeError(error)}`)
    }
  }

  // Chunked: no Content-Length, the body arrives as a stream.
  let release!: () => void
  const released = new Promise<void>(resolve => { release = resolve })
  const timer = setTimeout(release, 5_000)
  const abort = new AbortController()
  try {
    const init: RequestInit = {
      method: k.method,
      headers,
      body: streamOf(body ?? new Uint8Array(), k.transport === 'chunked-stalled' ? released : null),
      duplex: 'half',
      signal: abort.signal,
    }
    const res = await fetch(url, init)
    return { status: res.status, headers: res.headers, text: await res.text() }
  } catch (error) {
    throw new Error(`the client could not read an answer to the chunked upload: ${describeError(error)}`)
  } finally {
    clearTimeout(timer)
    release()
    abort.abort()
  }
}

const sortedList = (value: string | null): string[] => (value ?? '').split(',').map(s => s.trim()).filter(s => s !== '').sort()

/** The error body contract: `{status, message, errors: [{code, field?, message}]}` with stable codes. */
function expectErrorBody (answer: Answer, status: number, code: ErrorCode | undefined, field: string | undefined): void {
  expect(answer.headers.get('content-type') ?? '').to.match(/^application\/json/)
  let parsed: unknown
  try {
    parsed = JSON.parse(answer.text)
  } catch {
    expect.fail(`the body is not JSON: ${answer.text.slice(0, 200)}`)
  }
  expect(parsed).to.be.an('object')
  const body = parsed as Record<string, unknown>
  expect(Object.keys(body).sort()).to.deep.equal(['errors', 'message', 'status'])
  expect(body.status).to.equal(status)
  expect(body.message).to.be.a('string').that.is.not.empty
  expect(body.errors).to.be.an('array').that.is.not.empty
  const errors = body.errors as Record<string, unknown>[]
  for (const item of errors) {
    expect(item).to.be.an('object')
    expect(Object.keys(item).every(key => key === 'code' || key === 'field' || key === 'message'), `error item keys: ${JSON.stringify(item)}`).to.equal(true)
    expect(item.code).to.be.a('string')
    expect(Object.hasOwn(ERRORS, item.code as string), `unknown error code ${String(item.code)}`).to.equal(true)
    expect(ERRORS[item.code as ErrorCode][0], `status of code ${String(item.code)}`).to.equal(status)
    expect(item.message).to.be.a('string').that.is.not.empty
    if (item.field !== undefined) expect(item.field).to.be.a('string')
  }
  const first = errors[0]!
  if (code !== undefined) expect(first.code, `errors[0] of ${answer.text.slice(0, 300)}`).to.equal(code)
  if (field !== undefined) expect(first.field, `errors[0].field of ${answer.text.slice(0, 300)}`).to.equal(field)
}

// ---------------------------------------------------------------------------------------------------

describe('bad input', function () {
  interface Snapshot { label: string, read: () => Promise<string> }
  let snapshots: Snapshot[] = []
  const baseline: string[] = []

  async function rawPost (path: string, body: unknown): Promise<{ status: number, text: string }> {
    const res = await fetch(c.url + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
    return { status: res.status, text: await res.text() }
  }
  async function rawAdmin (path: string): Promise<{ status: number, text: string }> {
    const res = await fetch(c.url + path, { headers: { authorization: `Bearer ${ADMIN_KEY}` } })
    return { status: res.status, text: await res.text() }
  }
  async function must (what: string, promise: Promise<{ status: number, body: unknown }>, status = 200): Promise<void> {
    const res = await promise
    if (res.status !== status) throw new Error(`seeding failed (${what}): ${res.status} ${JSON.stringify(res.body)}`)
  }

  before(async function () {
    this.timeout(30_000)
    beacon = await startBeacon()
    const url = beacon.url
    const main = await createTenant(url, 'Bad input site')
    const other = await createTenant(url, 'Other site')
    const suspended = await createTenant(url, 'Suspended site')
    await must('suspend', admin(url, 'PATCH', `/admin/accounts/${suspended.account}`, { suspended: true }))
    const colorOnly = (access: string, extra: Record<string, unknown> = {}): Promise<string> =>
      createToken(url, main.account, { name: `color-${access}`, attributes: ['color'], access, ...extra })
    const revokedToken = await createToken(url, main.account, { name: 'revoked', attributes: ['*'], access: 'read-write' })
    await must('revoke', admin(url, 'DELETE', `/admin/accounts/${main.account}/tokens/${tokenId(revokedToken)}`))
    await must('event type signup', admin(url, 'PUT', `/admin/accounts/${main.account}/event-types/signup`, { required: ['plan'] }))
    await must('event type inherit', admin(url, 'PUT', `/admin/accounts/${main.account}/event-types/inherit`, { required: ['toString', 'valueOf'] }))
    await must('event type otherOnly', admin(url, 'PUT', `/admin/accounts/${other.account}/event-types/otherOnly`, { required: [] }))
    c = {
      url,
      port: beacon.port,
      account: main.account,
      token: main.token,
      other: other.account,
      otherToken: other.token,
      otherTokenId: tokenId(other.token),
      suspended: suspended.account,
      suspendedToken: suspended.token,
      readToken: await colorOnly('read'),
      writeToken: await colorOnly('write'),
      colorToken: await colorOnly('read-write'),
      ratedToken: await colorOnly('read-write', { ratePerSecond: 1 }),
      revokedToken,
      visitorId: visitorId(),
      profileId: 'seed.user+1@example.com',
    }

    // The known state, set through the API.
    const who = { account: c.account, token: c.token }
    const post = async (path: string, body: unknown): Promise<{ status: number, body: unknown }> => {
      const res = await rawPost(path, body)
      return { status: res.status, body: res.text }
    }
    await must('visitor attributes', post('/visitors/attributes', { ...who, visitorId: c.visitorId, attributes: { color: 'blue', tags: ['a', 'b'], score: 42, vip: true } }))
    await must('visitor segments', post('/visitors/segments', { ...who, visitorId: c.visitorId, assignees: ['seg-a', 'seg-b'] }))
    await must('profile attributes', post('/profiles/attributes', { ...who, profileId: c.profileId, attributes: { color: 'red', plan: 'pro', langs: ['en', 'fr'] } }))
    await must('profile segments', post('/profiles/segments', { ...who, profileId: c.profileId, assignees: ['seg-p', 'seg-q'] }))
    await must('link', post('/campaigns/query', { account: c.account, visitorId: c.visitorId, ...identified(main, c.profileId), platform: 'web', event: 'pageView' }))

    snapshots = [
      { label: 'visitor, everything', read: async () => JSON.stringify(await rawPost('/visitors/query', { ...who, visitorId: c.visitorId })) },
      { label: 'visitor, chosen names', read: async () => JSON.stringify(await rawPost('/visitors/query', { ...who, visitorId: c.visitorId, attributes: ['color', 'tags', 'email'], segments: ['seg-a', 'seg-x'] })) },
      { label: 'profile, everything', read: async () => JSON.stringify(await rawPost('/profiles/query', { ...who, profileId: c.profileId })) },
      { label: 'profile, chosen names', read: async () => JSON.stringify(await rawPost('/profiles/query', { ...who, profileId: c.profileId, attributes: ['plan', 'langs'], segments: ['seg-q'] })) },
      { label: 'accounts', read: async () => JSON.stringify(await rawAdmin('/admin/accounts')) },
      { label: 'account', read: async () => JSON.stringify(await rawAdmin(`/admin/accounts/${c.account}`)) },
      { label: 'tokens', read: async () => JSON.stringify(await rawAdmin(`/admin/accounts/${c.account}/tokens`)) },
      { label: 'event types', read: async () => JSON.stringify(await rawAdmin(`/admin/accounts/${c.account}/event-types`)) },
      { label: 'other tokens', read: async () => JSON.stringify(await rawAdmin(`/admin/accounts/${c.other}/tokens`)) },
    ]
    for (const snapshot of snapshots) baseline.push(await snapshot.read())
    const visitor = JSON.parse(JSON.parse(baseline[0]!).text)
    expect(visitor.attributes).to.deep.equal({ color: [{ value: 'blue' }], tags: [{ value: 'a' }, { value: 'b' }], score: [{ value: 42 }], vip: [{ value: true }] })
    expect(visitor.segments).to.deep.equal(['seg-a', 'seg-b'])
  })

  after(async () => {
    if (beacon === undefined) return
    await beacon.kill()
    removeDir(beacon.dataDir)
  })

  it(`has a corpus of at least 200 malformed requests (${cases.length})`, () => {
    expect(cases.length).to.be.greaterThanOrEqual(200)
  })

  for (const k of cases) {
    const title = `${k.method} ${k.path}: ${k.what} → ${k.status}${k.code === undefined ? '' : ' ' + k.code}`
    it(title, async () => {
      const answer = await send(k)
      expect(answer.status, `status; body: ${answer.text.slice(0, 300)}`).to.equal(k.status)
      if (k.allow !== undefined) expect(sortedList(answer.headers.get('allow'))).to.deep.equal(sortedList(k.allow))
      if (k.header !== undefined) expect(answer.headers.get(k.header), `${k.header} header`).to.be.a('string').that.is.not.empty
      if (k.method === 'HEAD') {
        expect(answer.text).to.equal('')
        return
      }
      expectErrorBody(answer, k.status, k.code, k.field)
    })
  }

  it('leaves the seeded visitor, profile, accounts, tokens and event types byte-for-byte unchanged', async () => {
    const now: string[] = []
    for (const snapshot of snapshots) now.push(await snapshot.read())
    // Compared all at once, so a failure shows every snapshot that moved.
    const byLabel = (texts: string[]): Record<string, string> => Object.fromEntries(snapshots.map((snapshot, i) => [snapshot.label, texts[i] ?? '']))
    expect(byLabel(now)).to.deep.equal(byLabel(baseline))
  })

  it('is still alive: /healthz answers 200, valid requests still work, nothing was logged as an error', async () => {
    expect(beacon.child.exitCode, 'exit code').to.equal(null)
    expect(beacon.child.signalCode, 'signal').to.equal(null)
    const health = await fetch(c.url + '/healthz')
    expect(health.status).to.equal(200)
    expect(await health.json()).to.deep.equal({ status: 'ok' })

    const event = await rawPost('/campaigns/query', { account: c.account, visitorId: visitorId(), platform: 'web', event: 'productView', sku: 'SKU-1', price: 9.5 })
    expect(event.status, event.text).to.equal(200)
    expect(JSON.parse(event.text)).to.deep.equal({ status: 200, message: 'Campaigns executed.', campaigns: [] })

    const fresh = visitorId()
    const write = await rawPost('/visitors/attributes', { account: c.account, token: c.token, visitorId: fresh, attributes: { color: 'teal' } })
    expect(write.status, write.text).to.equal(200)
    const read = await rawPost('/visitors/query', { account: c.account, token: c.token, visitorId: fresh })
    expect(read.status, read.text).to.equal(200)
    expect(JSON.parse(read.text)).to.deep.equal({ status: 200, message: 'OK', errors: [], attributes: { color: [{ value: 'teal' }] }, segments: [] })

    const failures = beacon.output().split('\n').filter(line => /"level":(50|60)/.test(line))
    expect(failures, 'error/fatal log lines').to.deep.equal([])
  })

  it('still stops gracefully on SIGTERM within 5 s (no request left in flight by aborted uploads)', async function () {
    this.timeout(15_000)
    const code = await Promise.race([beacon.stop(), new Promise<string>(resolve => setTimeout(() => resolve('timeout'), 5_000))])
    expect(beacon.output(), 'log of a completed drain').to.include('"msg":"beacon stopped"')
    expect(code).to.equal(0)
  })
})
