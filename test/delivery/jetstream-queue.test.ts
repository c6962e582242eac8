// JetStreamQueue against a real nats-server (started here on a random port with a temp store).

import { expect } from 'chai'
import { connect, nanos, type NatsConnection } from '@nats-io/transport-node'
import { AckPolicy, jetstreamManager, StorageType, type JetStreamManager } from '@nats-io/jetstream'
import type { DeliveryRecord } from '../../src/delivery/record.js'
import type { Feed, FeedAnswer } from '../../src/delivery/queue.js'
import { PUBLISH_SIZE_MAX_BYTES } from '../../src/delivery/limits.js'
import { JetStreamQueue } from '../../src/delivery/jetstream/queue.js'
import type { JetStreamQueueOptions } from '../../src/delivery/jetstream/options.js'
import { messageIdOf, subjectToken } from '../../src/delivery/jetstream/subjects.js'
import { startNatsServer, type NatsServer } from '../helpers/nats-server.js'
import { until } from '../helpers/until.js'
import { pauseProcess } from '../helpers/pause.js'

const quiet = { debug () {}, info () {}, warn () {}, error () {} }

let seq = 0
function record (fields: Partial<DeliveryRecord> = {}): DeliveryRecord {
  seq++
  const webhookId = fields.webhookId ?? 'orders'
  const id = `${seq}.${webhookId}`
  return {
    id,
    account: 'acc-1',
    webhookId,
    seq,
    status: 'pending',
    item: { id, occurredAtMs: Date.now(), context: { account: 'acc-1', event: 'purchase', eventFields: { orderId: `o-${seq}` } } },
    attempt: 1,
    attempts: [],
    dueMs: 0,
    createdAtMs: Date.now(),
    updatedAtMs: Date.now(),
    replayedAtMs: null,
    ...fields,
  }
}

const sleep = (ms: number): Promise<void> => new Promise(resolve => setTimeout(resolve, ms))

/** A feed that records what it gets and answers as told. */
function collector (answer: (record: DeliveryRecord) => FeedAnswer = () => 'taken'): { feed: Feed, got: DeliveryRecord[], times: number[] } {
  const got: DeliveryRecord[] = []
  const times: number[] = []
  return { got, times, feed: (r) => { got.push(r); times.push(Date.now()); return answer(r) } }
}

describe('JetStreamQueue (real nats-server)', function () {
  this.timeout(60_000)
  let nats: NatsServer
  const queues: JetStreamQueue[] = []
  let admin: NatsConnection
  let jsm: JetStreamManager

  const open = async (options: Partial<JetStreamQueueOptions> = {}): Promise<JetStreamQueue> => {
    const queue = await JetStreamQueue.connect({ url: nats.url, log: quiet, ...options })
    queues.push(queue)
    return queue
  }

  beforeEach(async () => {
    nats = await startNatsServer()
    admin = await connect({ servers: nats.url, maxReconnectAttempts: -1, reconnectTimeWait: 100 })
    jsm = await jetstreamManager(admin)
  })
  afterEach(async () => {
    for (const queue of queues.splice(0)) await queue.stop()
    await admin.close()
    await nats.close()
  })

  it('creates the stream (file storage, duplicate window) and the durable consumer when missing', async () => {
    const queue = await open({ duplicateWindowMs: 90_000, ackWaitMs: 20_000, ackPendingMax: 500 })
    await queue.start(collector().feed)
    const stream = await jsm.streams.info('BEACON_DELIVERIES')
    expect(stream.config.storage).to.equal(StorageType.File)
    expect(stream.config.subjects).to.deep.equal(['beacon.deliveries.>'])
    expect(stream.config.duplicate_window).to.equal(nanos(90_000))
    const consumer = await jsm.consumers.info('BEACON_DELIVERIES', 'beacon-delivery')
    expect(consumer.config.ack_policy).to.equal(AckPolicy.Explicit)
    expect(consumer.config.durable_name).to.equal('beacon-delivery')
    expect(consumer.config.ack_wait).to.equal(nanos(20_000))
    expect(consumer.config.max_ack_pending).to.equal(500)
  })

  it('starts when the stream setup times out at first (a server that answers after the 5 s request timeout)', async () => {
    // As a stream or consumer whose leader election missed under load answers (nats-server 2.10): late.
    const queue = await open()
    await pauseProcess(nats.pid!)
    const started = queue.start(collector().feed).then(() => 'started', (error: unknown) => `failed: ${String(error)}`)
    await sleep(6000)
    process.kill(nats.pid!, 'SIGCONT')
    expect(await started).to.equal('started')
    expect((await jsm.consumers.info('BEACON_DELIVERIES', 'beacon-delivery')).config.durable_name).to.equal('beacon-delivery')
  })

  it('reuses a stream and consumer that exist, with what they hold', async () => {
    await jsm.streams.add({ name: 'BEACON_DELIVERIES', subjects: ['beacon.deliveries.>'], storage: StorageType.File })
    await jsm.consumers.add('BEACON_DELIVERIES', { durable_name: 'beacon-delivery', ack_policy: AckPolicy.Explicit, ack_wait: nanos(30_000), max_ack_pending: 10_000 })
    const created = (await jsm.streams.info('BEACON_DELIVERIES')).created
    const first = await open()
    const r = record()
    await first.publish([r])
    await first.stop()
    const second = await open()
    const c = collector()
    await second.start(c.feed)
    await until('the record published before', () => c.got.length === 1)
    expect(c.got[0]!.id).to.equal(r.id)
    expect((await jsm.streams.info('BEACON_DELIVERIES')).created).to.equal(created)
    expect((await jsm.streams.list().next()).length).to.equal(1)
  })

  it('publishes records to per-account, per-webhook subjects and feeds them, decoded', async () => {
    const queue = await open()
    const c = collector()
    await queue.start(c.feed)
    const dotted = record({ account: 'acc.with.dots', webhookId: 'wh.*>x' })
    const plain = record()
    await queue.publish([dotted, plain])
    await until('two records', () => c.got.length === 2)
    expect(c.got.map(r => r.id).sort()).to.deep.equal([dotted.id, plain.id].sort())
    expect(c.got.find(r => r.id === dotted.id)).to.deep.equal(dotted)
    expect(queue.subjectOf(dotted)).to.equal(`beacon.deliveries.${subjectToken('acc.with.dots')}.${subjectToken('wh.*>x')}`)
    expect(queue.subjectOf(dotted).split('.')).to.have.length(4)
    const stream = await jsm.streams.info('BEACON_DELIVERIES', { subjects_filter: '>' })
    expect(Object.keys(stream.state.subjects ?? {}).sort()).to.deep.equal([queue.subjectOf(dotted), queue.subjectOf(plain)].sort())
  })

  it('feeds the records it published itself as they are, without decoding, and decodes those of another node', async () => {
    const queue = await open()
    const other = await open()
    const c = collector()
    await queue.start(c.feed)
    const mine = record()
    await queue.publish([mine])
    await until('its own record', () => c.got.length === 1)
    expect(c.got[0]).to.equal(mine) // the very object
    const theirs = record()
    await other.publish([theirs])
    await until('the other node\'s record', () => c.got.length === 2)
    expect(c.got[1]).not.to.equal(theirs)
    expect(c.got[1]).to.deep.equal(theirs)
  })

  it('keeps at most publishedCacheRecordsMax records of its own messages, the oldest going first', async () => {
    const queue = await open({ publishedCacheRecordsMax: 2 })
    const records = [record(), record(), record()]
    for (const r of records) await queue.publish([r]) // the first is dropped to keep the last two
    const c = collector()
    await queue.start(c.feed)
    await until('three records', () => c.got.length === 3)
    const fed = (r: DeliveryRecord): DeliveryRecord => c.got.find(x => x.id === r.id)!
    expect(fed(records[0]!)).not.to.equal(records[0]) // decoded
    expect(fed(records[0]!)).to.deep.equal(records[0])
    expect(fed(records[1]!)).to.equal(records[1])
    expect(fed(records[2]!)).to.equal(records[2])
  })

  it('never feeds a record kept from before for another message once the stream is made again', async () => {
    const queue = await open()
    // Published, kept by stream sequence, never consumed: then the server loses its store.
    const before = [record(), record(), record()]
    for (const r of before) await queue.publish([r])
    await nats.stop()
    const { rmSync } = await import('node:fs')
    rmSync(nats.storeDir, { recursive: true, force: true })
    await nats.restart()
    const c = collector()
    await until('reconnected', () => queue.isConnected, 20_000)
    await queue.start(c.feed)
    const after = [record(), record(), record()] // stream sequences 1, 2, 3 again
    for (const r of after) await queue.publish([r])
    await until('three records', () => c.got.length === 3, 20_000)
    expect(c.got.map(r => r.id).sort()).to.deep.equal(after.map(r => r.id).sort())
  })

  it('absorbs a re-publish of the same record (message id = record id), but not a replay of it', async () => {
    const queue = await open({ feedRetryDelayMs: 200 })
    const c = collector()
    const r = record()
    await queue.publish([r])
    await queue.publish([r])
    expect((await jsm.streams.info('BEACON_DELIVERIES')).state.messages).to.equal(1)
    const replayed = { ...r, replayedAtMs: Date.now() }
    expect(messageIdOf(replayed)).to.equal(`${r.id}@${replayed.replayedAtMs}`)
    await queue.publish([replayed])
    await queue.publish([replayed])
    expect((await jsm.streams.info('BEACON_DELIVERIES')).state.messages).to.equal(2)
    await queue.start(c.feed)
    await until('one', () => c.got.length === 1)
    // The replay of a record still in a worker's hands waits for it to be settled.
    queue.settle(c.got[0]!, 'delivered', 0)
    await until('both', () => c.got.length === 2)
    queue.settle(c.got[1]!, 'delivered', 0)
    await sleep(500)
    expect(c.got).to.have.length(2)
    expect(c.got.map(r => r.replayedAtMs).sort()).to.deep.equal([null, replayed.replayedAtMs].sort())
  })

  it('publishes thousands of records, each fed once', async () => {
    const queue = await open()
    const c = collector()
    await queue.start(c.feed)
    const records = Array.from({ length: 5000 }, () => record())
    await Promise.all([queue.publish(records.slice(0, 2500)), queue.publish(records.slice(2500))])
    await until('5,000 records', () => c.got.length >= 5000)
    expect(new Set(c.got.map(r => r.id)).size).to.equal(5000)
    for (const r of c.got) queue.settle(r, 'delivered', 0)
    await until('no ack pending', () => queue.heldCount === 0)
  })

  it('carries a webhook\'s records in messages of up to 100, each acked once all its records are settled; a retried one comes back alone', async () => {
    const queue = await open()
    const c = collector()
    await queue.publish(Array.from({ length: 250 }, () => record()))
    expect((await jsm.streams.info('BEACON_DELIVERIES')).state.messages).to.equal(3)
    await queue.start(c.feed)
    await until('250 fed', () => c.got.length === 250)
    expect(new Set(c.got.map(r => r.id)).size).to.equal(250)
    const retried = { ...c.got[7]!, attempt: 2, dueMs: Date.now() + 100 }
    for (const r of c.got) if (r.id !== retried.id) queue.settle(r, 'delivered', 0)
    queue.settle(retried, 'retry', 100)
    await until('the retry back', () => c.got.length === 251)
    expect(c.got[250]).to.deep.include({ id: retried.id, attempt: 2, dueMs: retried.dueMs })
    queue.settle(c.got[250]!, 'delivered', 0)
    // Work-queue retention: a message acked (all its records settled) leaves the stream.
    for (let i = 0; i < 100 && (await jsm.streams.info('BEACON_DELIVERIES')).state.messages > 0; i++) await sleep(20)
    expect((await jsm.streams.info('BEACON_DELIVERIES')).state.messages).to.equal(0)
    expect(queue.heldCount).to.equal(0)
  })

  it('splits a message over PUBLISH_SIZE_MAX_BYTES into halves until each fits; every record arrives whole', async () => {
    const queue = await open()
    const c = collector()
    // 100 records of ~10 KB: one message would be ~1 MB, a half ~500 KB, a quarter ~250 KB (fits).
    const big = Array.from({ length: 100 }, (_, i) => record({ item: { id: `x${i}`, occurredAtMs: 1, context: { account: 'acc-1', event: 'purchase', eventFields: { note: 'n'.repeat(10_000 + i) } } } }))
    await queue.publish(big)
    const info = await jsm.streams.info('BEACON_DELIVERIES')
    expect(info.state.messages).to.equal(4)
    expect(info.state.bytes / info.state.messages).to.be.below(PUBLISH_SIZE_MAX_BYTES)
    await queue.start(c.feed)
    await until('100 fed', () => c.got.length === 100)
    expect(c.got.map(r => r.id)).to.deep.equal(big.map(r => r.id))
    expect(c.got[99]).to.deep.equal(big[99])
    for (const r of c.got) queue.settle(r, 'delivered', 0)
  })

  it('retry: nak with the delay hands the record back after it, as last settled (attempt, history)', async () => {
    const queue = await open()
    const c = collector()
    await queue.start(c.feed)
    const r = record()
    await queue.publish([r])
    await until('first', () => c.got.length === 1)
    const settledMs = Date.now()
    const next: DeliveryRecord = { ...c.got[0]!, status: 'failed', attempt: 2, attempts: [{ atMs: settledMs, status: 503, latencyMs: 1 }], dueMs: settledMs + 800 }
    queue.settle(next, 'retry', 800)
    await until('the retry', () => c.got.length === 2, 5000)
    expect(c.times[1]! - settledMs).to.be.at.least(750)
    expect(c.got[1]).to.deep.include({ id: r.id, attempt: 2, status: 'failed' })
    expect(c.got[1]!.attempts).to.have.length(1)
    // A zero delay comes back at once.
    queue.settle({ ...c.got[1]!, attempt: 3 }, 'retry', 0)
    await until('the immediate retry', () => c.got.length === 3, 2000)
    expect(c.got[2]!.attempt).to.equal(3)
  })

  it('ack and term end a record; a record held by a worker is kept (heartbeats) past ack_wait', async () => {
    const queue = await open({ ackWaitMs: 1000 })
    const c = collector()
    await queue.start(c.feed)
    const [a, b, held] = [record(), record(), record()]
    await queue.publish([a, b, held])
    await until('three', () => c.got.length === 3)
    queue.settle(c.got.find(r => r.id === a.id)!, 'delivered', 0)
    queue.settle(c.got.find(r => r.id === b.id)!, 'dead', 0)
    await sleep(3000) // three ack_waits
    expect(c.got).to.have.length(3)
    const consumer = await jsm.consumers.info('BEACON_DELIVERIES', 'beacon-delivery')
    expect(consumer.num_ack_pending).to.equal(1) // the held one
    expect(consumer.num_redelivered).to.equal(0)
    queue.settle(c.got.find(r => r.id === held.id)!, 'delivered', 0)
    await until('nothing pending', () => queue.heldCount === 0)
    await sleep(200)
    expect((await jsm.consumers.info('BEACON_DELIVERIES', 'beacon-delivery')).num_ack_pending).to.equal(0)
  })

  it('a record left unsettled by a crashed node is handed to another, counting the lost delivery as an attempt', async () => {
    const crashing = await open({ ackWaitMs: 1000 })
    const c1 = collector()
    await crashing.start(c1.feed)
    const r = record()
    await crashing.publish([r])
    await until('fed to the first node', () => c1.got.length === 1)
    // A crash: the connection just goes, nothing is acked or nak'd.
    await (crashing as unknown as { nc: NatsConnection }).nc.close()
    const other = await open({ ackWaitMs: 1000 })
    const c2 = collector()
    await other.start(c2.feed)
    await until('redelivered to the second', () => c2.got.length === 1, 5000)
    expect(c2.got[0]).to.deep.include({ id: r.id, attempt: 2 })
  })

  it('a busy worker gets the record again later, as the same attempt; a webhook unknown here is given up after a few tries', async () => {
    const queue = await open({ feedRetryDelayMs: 100, goneRetriesMax: 2 })
    let busy = true
    const c = collector(r => r.webhookId === 'gone' ? 'gone' : busy ? 'busy' : 'taken')
    await queue.start(c.feed)
    const r = record()
    const lost = record({ webhookId: 'gone' })
    await queue.publish([r, lost])
    await until('the busy one twice', () => c.got.filter(x => x.id === r.id).length >= 2)
    busy = false
    await until('the unknown one three times', () => c.got.filter(x => x.id === lost.id).length === 3)
    await sleep(800)
    expect(c.got.filter(x => x.id === lost.id)).to.have.length(3)
    const taken = c.got.filter(x => x.id === r.id).length
    await sleep(300)
    expect(c.got.filter(x => x.id === r.id)).to.have.length(taken)
    expect(queue.heldCount).to.equal(1)
    // Handed back untried: no hand-out was an attempt.
    expect(c.got.map(x => x.attempt)).to.deep.equal(c.got.map(() => 1))
  })

  it('a record handed back busy, then taken and retried, comes back as the attempt after the one really made', async () => {
    const queue = await open({ feedRetryDelayMs: 100 })
    let feeds = 0
    const c = collector(() => ++feeds === 1 ? 'busy' : 'taken')
    await queue.start(c.feed)
    const r = record()
    await queue.publish([r])
    await until('taken after the hand-back', () => c.got.length === 2)
    expect(c.got[1]!.attempt).to.equal(1)
    queue.settle({ ...c.got[1]!, status: 'failed', attempt: 2, attempts: [{ atMs: Date.now(), status: 503, latencyMs: 1 }] }, 'retry', 0)
    await until('the retry', () => c.got.length === 3, 2000)
    expect(c.got[2]).to.deep.include({ id: r.id, attempt: 2 })
  })

  it('survives a nats-server restart: a publish during the outage completes after it, consumption resumes, nothing lost', async () => {
    const queue = await open()
    const c = collector()
    await queue.start(c.feed)
    const before = Array.from({ length: 100 }, () => record())
    await queue.publish(before)
    await until('the first 100', () => c.got.length === 100)
    for (const r of c.got) queue.settle(r, 'delivered', 0)
    await nats.stop()
    const during = Array.from({ length: 100 }, () => record())
    let published = false
    const publishing = queue.publish(during).then(() => { published = true })
    await sleep(1000)
    expect(published).to.equal(false)
    await nats.restart()
    await publishing
    const after = Array.from({ length: 100 }, () => record())
    await queue.publish(after)
    const ids = (): Set<string> => new Set(c.got.map(r => r.id))
    await until('all 300', () => ids().size === 300, 20_000)
    expect([...before, ...during, ...after].every(r => ids().has(r.id))).to.equal(true)
  })

  it('records fed before a restart can still be acked after it', async () => {
    const queue = await open({ ackWaitMs: 2000 })
    const c = collector()
    await queue.start(c.feed)
    await queue.publish([record(), record()])
    await until('two', () => c.got.length === 2)
    await nats.restart()
    await sleep(500)
    for (const r of c.got) queue.settle(r, 'delivered', 0)
    await until('acks applied', () => queue.heldCount === 0)
    let pending = -1
    for (let i = 0; i < 50 && pending !== 0; i++) {
      await sleep(100)
      pending = await jsm.consumers.info('BEACON_DELIVERIES', 'beacon-delivery').then(info => info.num_ack_pending, () => -1)
    }
    expect(pending).to.equal(0)
    await sleep(2500)
    expect(c.got).to.have.length(2)
  })

  it('re-creates the stream and consumer when the server comes back without its store', async () => {
    const queue = await open()
    const c = collector()
    await queue.start(c.feed)
    await queue.publish([record()])
    await until('one', () => c.got.length === 1)
    await nats.stop()
    const { rmSync } = await import('node:fs')
    rmSync(nats.storeDir, { recursive: true, force: true })
    await nats.restart()
    const r = record()
    await queue.publish([r])
    await until('the record published after', () => c.got.some(x => x.id === r.id), 20_000)
  })

  it('rejects a publish that cannot be stored within publishGiveUpMs (the relay keeps its rows)', async () => {
    const queue = await open({ publishGiveUpMs: 1000 })
    await queue.start(collector().feed)
    await nats.stop()
    const started = Date.now()
    let error: Error | null = null
    await queue.publish([record()]).catch((e: Error) => { error = e })
    expect(error).to.be.instanceOf(Error)
    expect(String(error)).to.match(/JetStream publish failed/)
    expect(Date.now() - started).to.be.within(900, 3000)
    await nats.restart()
    await queue.publish([record()])
  })
})
