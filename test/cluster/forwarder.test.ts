// Request routing between nodes (src/cluster/forwarder.ts) on one real nats-server: three forwarders
// with a table ownership, each answering through a handler that says which node ran the request.
// Forwarded answers come back unchanged; no owner → 503 unavailable after the budget; ownership moving
// (the old owner answers "moved", or says so after running into partition_moved) → the request is
// answered by the new owner; the owner's connection gone → waits, then the next owner or 503; a retry
// after a timed-out attempt is answered from the first execution (one run).

import { expect } from 'chai'
import type { ForwardedReply, ForwardedRequest } from '../../src/cluster/forwarder.js'
import { ApiError } from '../../src/errors.js'
import { log } from '../../src/log.js'
import { startForwardNode, type ForwardNode } from '../helpers/forward-node.js'
import { startNatsServer, type NatsServer } from '../helpers/nats-server.js'
import { TableOwnership } from '../helpers/table-ownership.js'

const PARTITIONS = 8
const NODES = ['a', 'b', 'c'] as const
type NodeId = typeof NODES[number]

type Node = ForwardNode<NodeId>

function request (url: string, body: Uint8Array | null = null): ForwardedRequest {
  return {
    route: 'post /things', method: 'post', url, query: 'account=x', params: ['p1'],
    headers: { 'content-type': 'application/json', origin: 'https://shop.example', authorization: 'Bearer k' },
    remoteAddress: '10.0.0.1', body,
  }
}

/** What a node answers by default: everything it was given, and who it is, with headers of its own. */
function answerOf (node: NodeId, request: ForwardedRequest): ForwardedReply {
  return {
    status: 201,
    contentType: 'application/json; charset=utf-8',
    headers: { 'Retry-After': '7', 'Access-Control-Allow-Origin': request.headers.origin ?? '', 'X-Node': node },
    body: Buffer.from(JSON.stringify({ node, request: { ...request, body: request.body === null ? null : Buffer.from(request.body).toString('base64') } })),
  }
}

function errorOf (promise: Promise<unknown>): Promise<ApiError> {
  return promise.then(() => { throw new Error('expected a refusal') }, (error: unknown) => error as ApiError)
}

// Both ways of sending: in batches per owner node (the default, src/cluster/forward-batch.ts), and one
// request/reply per send on the partition's subject (batching off).
for (const batch of [true, false]) {
  describe(`Forwarder (one nats-server, three nodes, table ownership, batching ${batch ? 'on' : 'off'})`, function () {
    this.timeout(60_000)
    let server: NatsServer
    const table = new Map<number, string>()
    const nodes = new Map<NodeId, Node>()
    const outcomes: [string, number, number][] = []

    async function startNode (id: NodeId, options: { budgetMs?: number, attemptTimeoutMs?: number, dedupeMs?: number, handlerExtraMs?: (account: string) => number } = {}): Promise<Node> {
      const node = await startForwardNode(id, server.url, {
        cluster: 'fwdtest', ownership: new TableOwnership(id, PARTITIONS, table),
        syncIntervalMs: 3_600_000, // the tests call sync() themselves, to place each handover exactly
        observe: (outcome, attempts, ms) => { outcomes.push([outcome, attempts, ms]) },
        batch,
        ...options,
      }, answerOf)
      nodes.set(id, node)
      return node
    }

    const node = (id: NodeId): Node => nodes.get(id)!
    const syncAll = (): void => { for (const each of nodes.values()) each.forwarder.sync() }

    before(async () => {
      server = await startNatsServer()
    })

    beforeEach(async () => {
      table.clear()
      outcomes.length = 0
      for (const id of NODES) await startNode(id)
    })

    afterEach(async () => {
      for (const each of nodes.values()) {
        await each.forwarder.close()
        if (!each.nc.isClosed()) await each.nc.close()
      }
      nodes.clear()
    })

    after(async () => {
      await server?.close()
    })

    it('answers a forwarded request with the owner\'s status, headers and body bytes, unchanged', async () => {
      table.set(3, 'b')
      syncAll()
      const bytes = Buffer.from([0, 1, 0xff, 0xfe, 0x7b, 0x22])
      const reply = await node('a').forwarder.forward(3, request('/one', bytes))
      expect(reply.status).to.equal(201)
      expect(reply.contentType).to.equal('application/json; charset=utf-8')
      expect(reply.headers).to.deep.equal({ 'Retry-After': '7', 'Access-Control-Allow-Origin': 'https://shop.example', 'X-Node': 'b' })
      const body = JSON.parse(Buffer.from(reply.body!).toString('utf8'))
      expect(body.node).to.equal('b')
      expect(body.request).to.deep.equal({ ...request('/one'), body: bytes.toString('base64') })
      expect(node('b').ran).to.deep.equal(['/one'])
      expect(node('a').ran).to.deep.equal([])
      expect(node('c').ran).to.deep.equal([])

      // No body, a 204 without one, and the owner forwarding to itself through NATS are all the same path.
      node('b').handler = async () => ({ status: 204, contentType: 'application/json', headers: null, body: null })
      const empty = await node('b').forwarder.forward(3, request('/two'))
      expect(empty).to.deep.equal({ status: 204, contentType: 'application/json', headers: null, body: null })
      // One send each, unless the machine is so busy that an answer took longer than the attempt time (1 s):
      // then the repeat joined the first execution (each handler ran once, above).
      expect(outcomes.map(([outcome]) => outcome)).to.deep.equal(['answered', 'answered'])
      for (const [, attempts] of outcomes) expect(attempts).to.be.at.least(1)
    })

    it('answers 503 unavailable with Retry-After: 1 when no node owns the partition within the budget (5 s)', async () => {
      const started = Date.now()
      const error = await errorOf(node('a').forwarder.forward(5, request('/nobody')))
      const elapsed = Date.now() - started
      console.log(`      no owner: 503 after ${elapsed} ms (budget 5000 ms), ${outcomes[0]?.[1]} sends`)
      expect(error).to.be.instanceOf(ApiError)
      expect(error.status).to.equal(503)
      expect(error.items[0]!.code).to.equal('unavailable')
      expect(error.headers).to.deep.equal({ 'Retry-After': '1' })
      expect(outcomes[0]![0]).to.equal('unavailable')
      for (const each of nodes.values()) expect(each.ran).to.deep.equal([])
    })

    it('waits while a partition has an owner in the table that does not serve it yet, and is answered once it does', async () => {
      table.set(2, 'c') // c has not subscribed yet: no responders
      const pending = node('a').forwarder.forward(2, request('/late'))
      await new Promise(resolve => setTimeout(resolve, 400))
      const started = Date.now()
      node('c').forwarder.sync()
      const reply = await pending
      console.log(`      answered ${Date.now() - started} ms after the owner subscribed, after ${outcomes[0]![1]} sends`)
      expect(reply.headers!['X-Node']).to.equal('c')
      expect(node('c').ran).to.deep.equal(['/late'])
    })

    it('retries at the new owner when the old one answers "moved" (it still listened, no longer owned)', async () => {
      table.set(4, 'b')
      syncAll()
      table.set(4, 'c') // b still subscribed (no sync yet), c not yet: only b gets the request
      const pending = node('a').forwarder.forward(4, request('/moving'))
      await new Promise(resolve => setTimeout(resolve, 200))
      node('c').forwarder.sync()
      const reply = await pending
      expect(reply.headers!['X-Node']).to.equal('c')
      expect(node('b').ran).to.deep.equal([]) // b answered "moved" without running it
      expect(node('c').ran).to.deep.equal(['/moving'])
      console.log(`      moved: answered by the new owner after ${outcomes[0]![1]} sends`)
    })

    it('runs a request once when old and new owner both listen for a moment (the "moved" answer races the owner\'s)', async () => {
      table.set(6, 'b')
      syncAll()
      table.set(6, 'c')
      node('c').forwarder.sync() // b and c both subscribed; b no longer owns it
      node('c').handler = async forwarded => {
        await new Promise(resolve => setTimeout(resolve, 100))
        return answerOf('c', forwarded)
      }
      const reply = await node('a').forwarder.forward(6, request('/overlap'))
      expect(reply.headers!['X-Node']).to.equal('c')
      expect(node('b').ran).to.deep.equal([])
      expect(node('c').ran).to.deep.equal(['/overlap']) // the retry after b's "moved" joined the running execution
    })

    it('retries at the new owner when the owner lost the partition while running the request (503 partition_moved)', async () => {
      table.set(1, 'b')
      syncAll()
      node('b').handler = async () => {
      // The entity log refused the write: another node claimed the partition meanwhile.
        table.set(1, 'c')
        node('c').forwarder.sync()
        return { status: 503, contentType: 'application/json', headers: { 'Retry-After': '1' }, body: Buffer.from('{}'), moved: true }
      }
      const reply = await node('a').forwarder.forward(1, request('/write'))
      expect(reply.status).to.equal(201)
      expect(reply.headers!['X-Node']).to.equal('c')
      expect(node('b').ran).to.deep.equal(['/write'])
      expect(node('c').ran).to.deep.equal(['/write'])
    })

    it('answers a retry after a timed-out attempt from the first execution: the handler runs once', async () => {
      await node('a').forwarder.close()
      await node('a').nc.close()
      const sender = await startNode('a', { attemptTimeoutMs: 200 })
      table.set(7, 'b')
      syncAll()
      node('b').handler = async forwarded => {
        await new Promise(resolve => setTimeout(resolve, 900))
        return answerOf('b', forwarded)
      }
      const reply = await sender.forwarder.forward(7, request('/slow'))
      expect(reply.headers!['X-Node']).to.equal('b')
      expect(node('b').ran).to.deep.equal(['/slow'])
      console.log(`      slow owner: answered after ${outcomes[0]![1]} sends, one execution`)
      expect(outcomes[0]![1]).to.be.greaterThan(1)
    })

    it('waits the account\'s extra time for a handler slower than the budget (sync webhooks), and runs it once however long it runs', async () => {
      for (const id of ['a', 'b'] as const) {
        await node(id).forwarder.close()
        await node(id).nc.close()
      }
      // Budget 1 s, plus 2.5 s for account "slow"; answers kept 300 ms once computed, and the handler runs 2 s.
      const sender = await startNode('a', { budgetMs: 1000, attemptTimeoutMs: 200, handlerExtraMs: account => account === 'slow' ? 2500 : 0 })
      await startNode('b', { dedupeMs: 300 })
      table.set(7, 'b')
      syncAll()
      node('b').handler = async forwarded => {
        await new Promise(resolve => setTimeout(resolve, 2000))
        return answerOf('b', forwarded)
      }
      const routing = sender.forwarder.routing()
      const ownership = new TableOwnership('a', PARTITIONS, table)
      const keyIn7 = (account: string): { account: string, id: string } => {
        for (let n = 0; ; n++) if (ownership.partitionOf(account, `v${n}`) === 7) return { account, id: `v${n}` }
      }
      const reply = await routing.forward(keyIn7('slow'), request('/slow'))
      expect(reply.headers!['X-Node']).to.equal('b')
      expect(node('b').ran, 'one execution, retries joining it').to.deep.equal(['/slow'])
      console.log(`      a 2 s handler, budget 1 s + 2.5 s: answered after ${outcomes[0]![1]} sends`)
      // Another account has the budget alone: 503 after 1 s, although the owner completes the request.
      const refused = await errorOf(routing.forward(keyIn7('other'), request('/other')))
      expect(refused.status).to.equal(503)
      expect(refused.message).to.include('waited 1000 ms')
    })

    it('refuses at once what does not fit in one NATS message (max_payload): a request with 413, an answer with 500 naming the limit', async () => {
      table.set(3, 'b')
      syncAll()
      const started = Date.now()
      const tooBig = await errorOf(node('a').forwarder.forward(3, request('/big', Buffer.alloc(2 * 1024 * 1024))))
      expect(tooBig.status).to.equal(413)
      expect(tooBig.items[0]!.code).to.equal('body_too_large')
      expect(node('b').ran).to.deep.equal([])
      node('b').handler = async () => ({ status: 200, contentType: 'application/json', headers: null, body: Buffer.alloc(2 * 1024 * 1024, 0x20) })
      const level = log.level
      log.level = 'fatal' // the owner logs the refused answer as an error: expected here
      const reply = await node('a').forwarder.forward(3, request('/big-answer')).finally(() => { log.level = level })
      expect(reply.status).to.equal(500)
      expect(JSON.parse(Buffer.from(reply.body!).toString('utf8')).message).to.match(/max_payload, 1048576 bytes/)
      console.log(`      both refused in ${Date.now() - started} ms`)
    })

    it('waits when the owner\'s connection is gone, then answers at the next owner, or 503 when none comes', async () => {
      table.set(0, 'b')
      table.set(5, 'b')
      syncAll()
      await node('b').nc.close() // the node's connection gone; its forwarder was not closed
      table.set(1, 'b')
      node('b').forwarder.sync() // keeps ticking without throwing, even with a partition to subscribe to
      // Partition 0 is taken over after a second; partition 5 never is (the table still names b).
      const takeover = setTimeout(() => {
        table.set(0, 'c')
        node('c').forwarder.sync()
      }, 1000)
      const started = Date.now()
      const [taken, lost] = await Promise.allSettled([node('a').forwarder.forward(0, request('/zero')), node('a').forwarder.forward(5, request('/five'))])
      clearTimeout(takeover)
      console.log(`      owner gone: partition 0 answered by its next owner, partition 5 refused after ${Date.now() - started} ms`)
      expect(taken.status).to.equal('fulfilled')
      expect((taken as PromiseFulfilledResult<ForwardedReply>).value.headers!['X-Node']).to.equal('c')
      expect(lost.status).to.equal('rejected')
      const error = (lost as PromiseRejectedResult).reason as ApiError
      expect(error.status).to.equal(503)
      expect(error.items[0]!.code).to.equal('unavailable')
      expect(error.headers).to.deep.equal({ 'Retry-After': '1' })
    })
  })
}
