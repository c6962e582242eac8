import { expect } from 'chai'
import { connect, headers, type NatsConnection } from '@nats-io/transport-node'
import { CLOSED, NO_RESPONDERS, Requests, TIMED_OUT } from '../../src/cluster/requests.js'
import { startNatsServer, type NatsServer } from '../helpers/nats-server.js'

describe('cluster: request/reply on one inbox (a real nats-server)', function () {
  this.timeout(30_000)
  let server: NatsServer
  let nc: NatsConnection
  let peer: NatsConnection

  before(async () => {
    server = await startNatsServer()
    nc = await connect({ servers: server.url })
    peer = await connect({ servers: server.url })
    peer.subscribe('echo', { callback: (_error, msg) => { msg.respond(msg.data) } })
    peer.subscribe('twice', { callback: (_error, msg) => { msg.respond('first'); msg.respond('second') } })
    peer.subscribe('header', { callback: (_error, msg) => { msg.respond(msg.headers?.get('X-Test') ?? '') } })
    peer.subscribe('silent', { callback: () => {} })
    await peer.flush()
  })

  after(async () => {
    await nc.close().catch(() => {})
    await peer.close().catch(() => {})
    await server.close()
  })

  it('answers many requests at once, each with its own answer, the first answer only', async () => {
    const requests = new Requests(nc)
    const answers = await Promise.all(Array.from({ length: 500 }, (_, i) => requests.request('echo', Buffer.from(`n${i}`), 2000)))
    expect(answers.map(msg => msg.string())).to.deep.equal(Array.from({ length: 500 }, (_, i) => `n${i}`))
    expect((await requests.request('twice', new Uint8Array(0), 2000)).string()).to.equal('first')
    const h = headers()
    h.set('X-Test', 'carried')
    expect((await requests.request('header', new Uint8Array(0), 2000, h)).string()).to.equal('carried')
    requests.close()
  })

  it('refuses with NO_RESPONDERS when nobody listens, TIMED_OUT when nobody answers in time, CLOSED once closed', async () => {
    const requests = new Requests(nc)
    expect(await requests.request('nobody.here', new Uint8Array(0), 2000).catch((error: unknown) => error)).to.equal(NO_RESPONDERS)
    const startedMs = performance.now()
    expect(await requests.request('silent', new Uint8Array(0), 200).catch((error: unknown) => error)).to.equal(TIMED_OUT)
    const waitedMs = performance.now() - startedMs
    expect(waitedMs).to.be.at.least(200)
    const waiting = requests.request('silent', new Uint8Array(0), 10_000).catch((error: unknown) => error)
    requests.close()
    expect(await waiting).to.equal(CLOSED)
    expect(await requests.request('echo', new Uint8Array(0), 2000).catch((error: unknown) => error)).to.equal(CLOSED)
  })

  it('refuses with CLOSED what waits when the connection closes', async () => {
    const own = await connect({ servers: server.url })
    const requests = new Requests(own)
    const waiting = requests.request('silent', new Uint8Array(0), 10_000).catch((error: unknown) => error)
    await own.close()
    expect(await waiting).to.equal(CLOSED)
  })
})
