// Batched forwarding (src/cluster/forward-batch.ts) on a real 3-server NATS cluster: three forwarders,
// each connected to its own server, with table ownerships. A batch holding requests of several
// partitions, one of which the sender's view still gives the wrong node and one of which moves while the
// owner runs it: every request answered by its owner, each run once, the rest of the batch untouched. A
// batch larger than N (and larger than max_payload) goes as several messages. A request whose answer does
// not reach the sender in time (the batch's answer comes after its attempt gave up: lost to it) is sent
// again on its partition's subject and joins the first execution, while the other requests of its batch
// are answered at once.

import { expect } from 'chai'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import type { ForwardedReply, ForwardedRequest } from '../../src/cluster/forwarder.js'
import { Requests, TIMED_OUT } from '../../src/cluster/requests.js'
import { startForwardNode, type ForwardNode } from '../helpers/forward-node.js'
import { startNatsCluster, type NatsCluster } from '../helpers/nats-cluster.js'
import { TableOwnership } from '../helpers/table-ownership.js'
import { until } from '../helpers/until.js'

const PARTITIONS = 16
type NodeId = 'a' | 'b' | 'c'

type Node = ForwardNode<NodeId>

function request (url: string, body: Uint8Array | null = null): ForwardedRequest {
  return { route: 'post /things', method: 'post', url, query: '', params: [], headers: {}, remoteAddress: '10.0.0.1', body }
}

function answerOf (node: NodeId, request: ForwardedRequest): ForwardedReply {
  return { status: 200, contentType: 'application/json', headers: { 'X-Node': node }, body: Buffer.from(JSON.stringify({ node, url: request.url })) }
}

const servedBy = (reply: ForwardedReply): string => reply.headers!['X-Node']!
const urlOf = (reply: ForwardedReply): string => JSON.parse(Buffer.from(reply.body!).toString('utf8')).url

describe('Forwarder batches (a real 3-server NATS cluster, three nodes, table ownership)', function () {
  this.timeout(120_000)
  let cluster: NatsCluster
  /** The owners' table: what b and c own. */
  const table = new Map<number, string>()
  /** The sender's view of it: a's ownership, which may lag. */
  const view = new Map<number, string>()
  const nodes = new Map<NodeId, Node>()
  /** The sends each of a's forwards took, in the order they ended. */
  const attempts: number[] = []
  const spies: NatsConnection[] = []

  /** Node `id` on server `index`; a (the sender) reads `view`, b and c the table. */
  async function startNode (id: NodeId, index: number, options: { attemptTimeoutMs?: number, batchMax?: number } = {}): Promise<Node> {
    const node = await startForwardNode(id, cluster.urls[index]!, {
      cluster: 'batchtest', ownership: new TableOwnership(id, PARTITIONS, id === 'a' ? view : table),
      syncIntervalMs: 3_600_000, // the tests call sync() themselves
      observe: (_outcome, sends) => { attempts.push(sends) },
      ...options,
    }, answerOf)
    nodes.set(id, node)
    return node
  }

  const node = (id: NodeId): Node => nodes.get(id)!
  const syncAll = (): void => { for (const each of nodes.values()) each.forwarder.sync() }

  /** a forwards every request in the same turn. */
  function sendAll (requests: Array<[number, ForwardedRequest]>): Promise<ForwardedReply[]> {
    return Promise.all(requests.map(([partition, forwarded]) => node('a').forwarder.forward(partition, forwarded)))
  }

  /** Both owners' batch subjects reach a's server (interest crosses the routes in its own time). */
  async function interestSeen (): Promise<void> {
    const requests = new Requests(node('a').nc)
    try {
      for (const id of ['b', 'c'] as const) {
        const subject = node('a').forwarder.nodeSubject(id)
        // An empty batch gets no answer: a listener shows as a timeout, none as "no responders".
        await until(`${id}'s batch subject seen from a's server`, async () => await requests.request(subject, new Uint8Array(0), 100).catch((error: unknown) => error) === TIMED_OUT, 30_000, 10)
      }
    } finally {
      requests.close()
    }
  }

  before(async () => {
    cluster = await startNatsCluster()
  })

  beforeEach(async () => {
    table.clear()
    view.clear()
    attempts.length = 0
    await startNode('a', 0)
    await startNode('b', 1)
    await startNode('c', 2)
  })

  afterEach(async () => {
    for (const each of nodes.values()) {
      await each.forwarder.close()
      if (!each.nc.isClosed()) await each.nc.close()
    }
    nodes.clear()
    for (const spy of spies.splice(0)) await spy.close()
  })

  after(async () => {
    await cluster?.close()
  })

  /** Replaces node a with one of these options (same server). */
  async function restartSender (options: { attemptTimeoutMs?: number, batchMax?: number }): Promise<void> {
    await node('a').forwarder.close()
    await node('a').nc.close()
    await startNode('a', 0, options)
  }

  it('answers a batch of several partitions\' requests, one moved before it arrived and one while it ran, each at its owner, each run once', async () => {
    for (const p of [1, 2, 3, 4, 5, 6]) { table.set(p, 'b'); view.set(p, 'b') }
    table.set(4, 'c') // a's view still says b: b answers "moved" for it within the batch
    syncAll()
    await interestSeen()
    node('b').handler = async forwarded => {
      if (forwarded.url === '/p3') {
        // The partition moves while b runs its request (the entity log refused the write: 503 partition_moved).
        table.set(3, 'c')
        view.set(3, 'c')
        node('c').forwarder.sync()
        return { status: 503, contentType: 'application/json', headers: { 'Retry-After': '1' }, body: Buffer.from('{}'), moved: true }
      }
      return answerOf('b', forwarded)
    }
    // a's view catches up with partition 4 once b has the batch (and said "moved" for it).
    const caughtUp = until('b ran the batch', () => node('b').ran.includes('/p1'), 30_000, 5).then(() => { view.set(4, 'c') })
    const replies = await sendAll([1, 2, 3, 4, 5, 6].map(p => [p, request(`/p${p}`)]))
    await caughtUp
    expect(replies.map(servedBy)).to.deep.equal(['b', 'b', 'c', 'c', 'b', 'b'])
    expect(replies.map(reply => urlOf(reply))).to.deep.equal(['/p1', '/p2', '/p3', '/p4', '/p5', '/p6'])
    expect([...node('b').ran].sort()).to.deep.equal(['/p1', '/p2', '/p3', '/p5', '/p6'])
    expect([...node('c').ran].sort()).to.deep.equal(['/p3', '/p4'])
    expect(node('a').ran).to.deep.equal([])
    // The six first sends went in one message (one turn, one owner in view).
    expect(node('a').forwarder.batchesSent).to.equal(1)
  })

  it('answers a request whose batch reached the node gaining its partition before it served it ("moved"): that node answers it once it serves, within the budget', async () => {
    // a's view already names b (its lease), which does not serve partition 7 yet (its recovery runs).
    view.set(7, 'b')
    syncAll()
    await interestSeen()
    const reply = node('a').forwarder.forward(7, request('/gained'))
    await until('b said "moved" to the batch', () => node('a').forwarder.batchesSent === 1, 30_000, 5)
    await new Promise(resolve => setTimeout(resolve, 300))
    // b's recovery done: it serves the partition (subscribes to its subject).
    table.set(7, 'b')
    node('b').forwarder.sync()
    const answered = await reply
    expect(servedBy(answered)).to.equal('b')
    expect(node('b').ran).to.deep.equal(['/gained'])
  })

  it('sends a batch larger than N, or than max_payload, as several messages, every request answered once by its owner', async () => {
    await restartSender({ batchMax: 8 })
    for (let p = 0; p < PARTITIONS; p++) { const owner = p % 2 === 0 ? 'b' : 'c'; table.set(p, owner); view.set(p, owner) }
    syncAll()
    await interestSeen()
    const many: Array<[number, ForwardedRequest]> = Array.from({ length: 50 }, (_, i) => [i % PARTITIONS, request(`/n${i}`)])
    const replies = await sendAll(many)
    expect(replies.map(reply => urlOf(reply))).to.deep.equal(many.map(([, forwarded]) => forwarded.url))
    expect(replies.map(servedBy)).to.deep.equal(many.map(([p]) => p % 2 === 0 ? 'b' : 'c'))
    expect(node('b').ran).to.have.length(25)
    expect(node('c').ran).to.have.length(25)
    expect(new Set([...node('b').ran, ...node('c').ran]).size).to.equal(50)
    // 25 requests per owner, at most 8 a batch: 4 messages each.
    expect(node('a').forwarder.batchesSent).to.equal(8)

    // Five requests of 300 KB for b: at most three fit in one message of max_payload (1 MB).
    const big: Array<[number, ForwardedRequest]> = Array.from({ length: 5 }, (_, i) => [0, request(`/big${i}`, Buffer.alloc(300 * 1024, i))])
    const bigReplies = await sendAll(big)
    expect(bigReplies.map(reply => urlOf(reply))).to.deep.equal(['/big0', '/big1', '/big2', '/big3', '/big4'])
    expect(node('a').forwarder.batchesSent).to.equal(10)
  })

  it('sends a request again when its batch\'s answer comes after its attempt gave up, and the retry joins the first execution; the others of the batch are answered at once', async () => {
    await restartSender({ attemptTimeoutMs: 200 })
    for (const p of [1, 2]) { table.set(p, 'b'); view.set(p, 'b') }
    syncAll()
    await interestSeen()
    // Sees the retries, which take partition 2's own subject (every subscriber gets each request).
    const spy = await connect({ servers: cluster.urls[0]! })
    spies.push(spy)
    let retries = 0
    spy.subscribe(node('a').forwarder.subject(2), { callback: () => { retries++ } })
    await spy.flush()
    let release: () => void = () => {}
    const held = new Promise<void>(resolve => { release = resolve })
    node('b').handler = async forwarded => {
      if (forwarded.url === '/slow') await held
      return answerOf('b', forwarded)
    }
    const sender = node('a').forwarder
    const slow = sender.forward(2, request('/slow'))
    const fast = await sender.forward(1, request('/fast'))
    expect(urlOf(fast)).to.equal('/fast')
    expect(attempts, 'the fast one answered by the first batch\'s answer, the slow one still running').to.deep.equal([1])
    // The slow one's first answer never reached a in time: it was sent again, then b answers.
    await until('the slow request sent again', () => retries >= 1, 30_000, 5)
    release()
    expect(urlOf(await slow)).to.equal('/slow')
    expect(node('b').ran, 'each run once: the retries joined the first execution').to.deep.equal(['/slow', '/fast'])
    expect(attempts[1], 'the slow request\'s sends').to.be.greaterThan(1)
    expect(sender.batchesSent).to.equal(1)
  })
})
