// The HTTP hook of routing (src/http/server.ts, option `cluster`) end to end, in process: a real
// Beacon (the owner: real LMDB, actors, catalogs) and a second HttpServer (the front, another node's
// frontend) serving the same route list, whose `cluster` says it owns no partition, wired to the owner
// through two Forwarders on a real nats-server. The owner side is an HttpServer over the owner's routes
// that only runs forwarded requests (runForwarded). Every keyed request sent to the front is answered
// exactly as the owner answers it directly: status, body, headers (CORS included); with no owner the
// front answers 503 unavailable with Retry-After after its budget.

import { expect } from 'chai'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { Forwarder } from '../../src/cluster/forwarder.js'
import { ApiError } from '../../src/errors.js'
import { HttpServer, type Route } from '../../src/http/server.js'
import { startNatsServer, type NatsServer } from '../helpers/nats-server.js'
import { TableOwnership } from '../helpers/table-ownership.js'
import { startInProcess, type InProcess } from '../helpers/in-process.js'
import { ADMIN_KEY, admin, createTenant, visitorId, type Tenant } from '../helpers/beacon.js'

const PARTITIONS = 8
const ORIGIN = 'https://shop.example'

interface Seen { status: number, headers: Record<string, string>, body: string }

/** Headers that differ between two answers whatever their content. */
const VOLATILE = new Set(['date'])

async function send (base: string, method: string, path: string, body: unknown, headers: Record<string, string> = {}): Promise<Seen> {
  const res = await fetch(base + path, {
    method,
    headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  })
  const seen: Record<string, string> = {}
  res.headers.forEach((value, name) => { if (!VOLATILE.has(name)) seen[name] = value })
  return { status: res.status, headers: seen, body: await res.text() }
}

describe('Routing through the HTTP server (two HttpServers, forwarders on a real nats-server)', function () {
  this.timeout(60_000)
  let nats: NatsServer
  let owner: InProcess
  let tenant: Tenant
  let ncOwner: NatsConnection
  let ncFront: NatsConnection
  let ownerForwarder: Forwarder
  let frontForwarder: Forwarder
  let front: HttpServer
  let frontUrl: string
  const table = new Map<number, string>()
  const forwarded: string[] = []
  const outcomes: string[] = []

  before(async () => {
    nats = await startNatsServer()
    owner = await startInProcess()
    tenant = await createTenant(owner.url)
    const patched = await admin(owner.url, 'PATCH', `/admin/accounts/${tenant.account}`, { allowedOrigins: [ORIGIN], allowBrowserTokens: true })
    expect(patched.status).to.equal(200)
    for (let p = 0; p < PARTITIONS; p++) table.set(p, 'owner')

    const routes: Route[] = [...owner.beacon.routes]
    const options = { host: '127.0.0.1', port: 0, bodySizeMaxBytes: 64 * 1024, inflightMax: 1000, routes, onError: (error: unknown) => { console.error(error) } }
    // The owner's side: the same routes (the owner's actors and catalogs) run for forwarded requests.
    const ownerSide = new HttpServer(options)
    ncOwner = await connect({ servers: nats.url })
    ownerForwarder = new Forwarder({ nc: ncOwner, cluster: 'httptest', ownership: new TableOwnership('owner', PARTITIONS, table) })
    ownerForwarder.serve((request, id) => {
      forwarded.push(`${request.route} ${request.url}`)
      return ownerSide.runForwarded(request, id)
    })

    ncFront = await connect({ servers: nats.url })
    const ownership = new TableOwnership('front', PARTITIONS, table)
    frontForwarder = new Forwarder({ nc: ncFront, cluster: 'httptest', ownership, budgetMs: 1500, observe: outcome => { outcomes.push(outcome) } })
    front = new HttpServer({
      ...options,
      cluster: frontForwarder.routing(),
    })
    frontUrl = `http://127.0.0.1:${await front.listen()}`
  })

  after(async () => {
    await front?.drain()
    await frontForwarder?.close()
    await ownerForwarder?.close()
    await ncFront?.close()
    await ncOwner?.close()
    await owner?.close()
    await nats?.close()
  })

  /** The same request to the owner and to the front: both answers, the front's forwarded (or not). */
  async function both (method: string, path: string, body: unknown, headers: Record<string, string> = {}): Promise<[Seen, Seen]> {
    const direct = await send(owner.url, method, path, body, headers)
    const before = forwarded.length
    const routed = await send(frontUrl, method, path, body, headers)
    return [direct, { ...routed, headers: { ...routed.headers, 'x-test-forwarded': String(forwarded.length - before) } }]
  }

  function expectSame ([direct, routed]: [Seen, Seen], forwards: number): void {
    expect(routed.headers['x-test-forwarded']).to.equal(String(forwards))
    const { 'x-test-forwarded': _count, ...headers } = routed.headers
    expect(routed.status).to.equal(direct.status)
    expect(routed.body).to.equal(direct.body)
    expect(headers).to.deep.equal(direct.headers)
  }

  it('answers the public endpoints through the front exactly as the owner does', async () => {
    const visitor = visitorId()
    const { account, token } = tenant
    // Reads first and twice (a write changes what the next read shows); writes answer the same each time.
    expectSame(await both('POST', '/visitors/query', { account, token, visitorId: visitor }), 1)
    const event = await both('POST', '/campaigns/query', { account, visitorId: visitor, platform: 'web', event: 'pageView', path: '/shoes' })
    expect(event[0].status).to.equal(200)
    expectSame(event, 1)
    expectSame(await both('POST', '/visitors/attributes', { account, token, visitorId: visitor, attributes: { color: 'red' } }), 1)
    expectSame(await both('POST', '/profiles/attributes', { account, token, profileId: 'ana@example.com', attributes: { plan: 'pro' } }), 1)
    const read = await both('POST', '/visitors/query', { account, token, visitorId: visitor.toUpperCase(), attributes: ['color'] })
    expect(JSON.parse(read[1].body).attributes.color[0].value).to.equal('red')
    expectSame(read, 1)
    expectSame(await both('POST', '/profiles/query', { account, token, profileId: 'ana@example.com' }), 1)
    expectSame(await both('POST', '/visitors/segments', { account, token, visitorId: visitor, assignees: ['vip'] }), 1)

    // A browser's call: CORS headers come from the owner's answer.
    const browser = await both('POST', `/campaigns/query?account=${account}`, { account, visitorId: visitor, platform: 'web', event: 'pageView', path: '/' }, { origin: ORIGIN })
    expect(browser[1].headers['access-control-allow-origin']).to.equal(ORIGIN)
    expectSame(browser, 1)
    const refusedOrigin = await both('POST', `/campaigns/query?account=${account}`, { account, visitorId: visitor, platform: 'web', event: 'pageView', path: '/' }, { origin: 'https://evil.example' })
    expect(refusedOrigin[1].status).to.equal(403)
    expectSame(refusedOrigin, 1)

    // Refusals made at the owner (token, validation) come back as they are.
    const badToken = await both('POST', '/visitors/query', { account, token: 'bk_nope_nope', visitorId: visitor })
    expect(badToken[1].status).to.equal(401)
    expectSame(badToken, 1)
    const invalid = await both('POST', '/campaigns/query', { account, visitorId: visitor, platform: 'web', event: 'pageView', path: 5 })
    expect(invalid[1].status).to.equal(400)
    expectSame(invalid, 1)
    // No key to route by (not JSON, or no visitorId): refused at the front itself, the same way.
    expectSame(await both('POST', '/campaigns/query', '{not json'), 0)
    expectSame(await both('POST', '/campaigns/query', { account, platform: 'web', event: 'pageView' }), 0)
    // A preflight names no visitor: answered by the front.
    expectSame(await both('OPTIONS', `/campaigns/query?account=${account}`, undefined, { origin: ORIGIN, 'access-control-request-method': 'POST' }), 0)
  })

  it('answers the admin routes of one visitor or profile through the front as the owner does; the guard refuses at the front', async () => {
    const visitor = visitorId()
    const { account, token } = tenant
    await send(owner.url, 'POST', '/visitors/attributes', { account, token, visitorId: visitor, attributes: { size: 'M' } })
    const key = { authorization: `Bearer ${ADMIN_KEY}` }
    const snapshot = await both('GET', `/admin/accounts/${account}/visitors/${visitor}`, undefined, key)
    expect(snapshot[1].status).to.equal(200)
    expectSame(snapshot, 1)
    expectSame(await both('GET', `/admin/accounts/${account}/profiles/ana@example.com`, undefined, key), 1)
    expectSame(await both('GET', `/admin/accounts/${account}/profiles/ana@example.com/export`, undefined, key), 1)
    const unauthorized = await both('GET', `/admin/accounts/${account}/visitors/${visitor}`, undefined, { authorization: 'Bearer wrong' })
    expect(unauthorized[1].status).to.equal(401)
    expectSame(unauthorized, 0)
    // Erasure through the front runs once, at the owner: a second one finds nothing.
    const erased = await send(frontUrl, 'DELETE', `/admin/accounts/${account}/visitors/${visitor}`, undefined, key)
    expect(erased.status).to.equal(200)
    const again = await send(owner.url, 'DELETE', `/admin/accounts/${account}/visitors/${visitor}`, undefined, key)
    expect(again.status).to.equal(404)
  })

  it('answers 503 unavailable with Retry-After: 1 through the front while the partition has no owner, then serves again', async () => {
    const visitor = visitorId()
    const { account } = tenant
    const partition = new TableOwnership('x', PARTITIONS, table).partitionOf(account, visitor)
    table.delete(partition)
    try {
      const started = Date.now()
      const refused = await send(frontUrl, 'POST', '/campaigns/query', { account, visitorId: visitor, platform: 'web', event: 'pageView', path: '/' })
      console.log(`      no owner: ${refused.status} after ${Date.now() - started} ms (budget 1500 ms)`)
      expect(refused.status).to.equal(503)
      expect(refused.headers['retry-after']).to.equal('1')
      expect(JSON.parse(refused.body).errors[0].code).to.equal('unavailable')
      expect(outcomes.at(-1)).to.equal('unavailable')
    } finally {
      table.set(partition, 'owner')
    }
    ownerForwarder.sync()
    const served = await send(frontUrl, 'POST', '/campaigns/query', { account, visitorId: visitor, platform: 'web', event: 'pageView', path: '/' })
    expect(served.status).to.equal(200)
  })
})

describe('Routing through the HTTP server when a node loses the partition while serving it (503 partition_moved)', function () {
  this.timeout(60_000)
  let nats: NatsServer
  const table = new Map<number, string>()
  const nodes = new Map<string, { server: HttpServer, forwarder: Forwarder, nc: NatsConnection, url: string, ownership: TableOwnership }>()
  /** Per node: throw partition_moved (after running `then`) on the next request it serves. */
  const loseNext = new Map<string, () => void>()
  const ran: string[] = []

  function routesOf (name: string): Route[] {
    return [{
      method: 'post', pattern: '/things', body: true,
      partitionKey: request => {
        const body = request.body as { account?: unknown, id?: unknown }
        return typeof body.account === 'string' && typeof body.id === 'string' ? { account: body.account, id: body.id } : null
      },
      handler: async request => {
        ran.push(name)
        const lose = loseNext.get(name)
        if (lose !== undefined) {
          loseNext.delete(name)
          lose()
          throw new ApiError('partition_moved', undefined, undefined, { 'Retry-After': '1' })
        }
        return { status: 200, body: { node: name, got: request.body }, headers: { 'X-Node': name } }
      },
    }]
  }

  before(async () => {
    nats = await startNatsServer()
    for (const name of ['a', 'b', 'c']) {
      const nc = await connect({ servers: nats.url })
      const ownership = new TableOwnership(name, PARTITIONS, table)
      const forwarder = new Forwarder({ nc, cluster: 'movedtest', ownership })
      const partitionOf = (key: { account: string, id: string }): number => ownership.partitionOf(key.account, key.id)
      const server: HttpServer = new HttpServer({
        host: '127.0.0.1', port: 0, bodySizeMaxBytes: 1024, inflightMax: 100, routes: routesOf(name), onError: error => { console.error(error) },
        cluster: { owns: key => ownership.owns(partitionOf(key)), forward: (key, request) => forwarder.forward(partitionOf(key), request) },
      })
      forwarder.serve((request, id) => server.runForwarded(request, id))
      nodes.set(name, { server, forwarder, nc, url: `http://127.0.0.1:${await server.listen()}`, ownership })
    }
  })

  after(async () => {
    for (const node of nodes.values()) {
      await node.server.drain()
      await node.forwarder.close()
      await node.nc.close()
    }
    await nats?.close()
  })

  const body = { account: 'acc', id: 'visitor-1' }
  const partition = (): number => nodes.get('a')!.ownership.partitionOf(body.account, body.id)
  const moveTo = (name: string): void => {
    table.set(partition(), name)
    nodes.get(name)!.forwarder.sync()
  }

  it('a request served here whose write is refused goes to the new owner', async () => {
    ran.length = 0
    moveTo('a')
    loseNext.set('a', () => moveTo('b'))
    const answer = await send(nodes.get('a')!.url, 'POST', '/things', body)
    expect(answer.status).to.equal(200)
    expect(JSON.parse(answer.body)).to.deep.equal({ node: 'b', got: body })
    expect(answer.headers['x-node']).to.equal('b')
    expect(ran).to.deep.equal(['a', 'b'])
  })

  it('a forwarded request whose write the owner refuses is answered "moved" and retried at the next owner', async () => {
    ran.length = 0
    moveTo('b')
    loseNext.set('b', () => moveTo('c'))
    const answer = await send(nodes.get('a')!.url, 'POST', '/things', body)
    expect(answer.status).to.equal(200)
    expect(JSON.parse(answer.body)).to.deep.equal({ node: 'c', got: body })
    expect(ran).to.deep.equal(['b', 'c'])
  })
})
