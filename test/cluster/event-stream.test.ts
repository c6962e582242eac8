// The cluster's event log stream (src/cluster/event-stream.ts) on a real 3-server NATS JetStream
// cluster: R3, opened idempotently (settings brought in line), MaxAge and MaxBytes from the event log's
// settings (the oldest events dropped over the cap), one message per event under its documented subject,
// a retry with the same Idempotency-Key stored once, pages newest first across the read windows (other
// accounts' events in between), the export oldest first, and erasure by subject purge.

import { expect } from 'chai'
import { randomUUID } from 'node:crypto'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { jetstreamManager } from '@nats-io/jetstream'
import { EventStream, eventStreamName, profileToken } from '../../src/cluster/event-stream.js'
import type { EventQuery, LoggedEvent } from '../../src/store/event-log.js'
import { startNatsCluster, type NatsCluster } from '../helpers/nats-cluster.js'
import { startHeldLink } from '../helpers/held-link.js'
import { ApiError } from '../../src/errors.js'

const DAY_MS = 86_400_000
const ALL: EventQuery = { fromMs: 0, toMs: Number.MAX_SAFE_INTEGER, visitorId: null, profileId: null, kind: null }

describe('cluster: the event log stream (3-server JetStream cluster)', function () {
  this.timeout(300_000)
  let nats: NatsCluster
  let nc: NatsConnection

  before(async () => {
    nats = await startNatsCluster()
    nc = await connect({ servers: nats.urls })
  })
  after(async () => {
    await nc?.close()
    await nats?.close()
  })

  const open = (cluster: string, days = 30, sizeMaxBytes = 0): Promise<EventStream> =>
    EventStream.open({ nc, cluster, replicas: 3, retentionMs: days * DAY_MS, sizeMaxBytes })

  async function allPages (events: EventStream, account: string, query: EventQuery, limit: number): Promise<LoggedEvent[]> {
    const out: LoggedEvent[] = []
    let cursor: string | null = null
    for (let pages = 0; pages < 1000; pages++) {
      const page: { events: LoggedEvent[], next: string | null } = await events.page(account, query, limit, cursor)
      out.push(...page.events)
      if (page.next === null) return out
      cursor = page.next
    }
    throw new Error('more than 1000 pages')
  }

  it('answers an event it cannot confirm 503 write_unconfirmed with Retry-After, though JetStream stored it (an unknown outcome, never a plain refusal)', async () => {
    await open('held')
    const link = await startHeldLink(nats.urls[0]!)
    const held = await connect({ servers: link.url, ignoreClusterUpdates: true })
    try {
      const events = await EventStream.open({ nc: held, cluster: 'held', replicas: 3, retentionMs: DAY_MS, sizeMaxBytes: 0, appendTimeoutMs: 500 })
      link.hold()
      const refused = await events.append('acc', 'v1', null, { event: 'pageView', path: '/' }, Date.now(), []).then(() => null, (error: unknown) => error)
      link.release()
      expect(refused).to.be.instanceOf(ApiError)
      expect((refused as ApiError).items[0]!.code).to.equal('write_unconfirmed')
      expect((refused as ApiError).headers).to.deep.equal({ 'Retry-After': '1' })
      const stored = await (await open('held')).page('acc', ALL, 10, null)
      expect(stored.events.map(event => event.visitorId)).to.deep.equal(['v1'])
    } finally {
      await held.close()
      await link.close()
    }
  })

  it('creates the stream R3 with MaxAge and MaxBytes, and a second open with other settings updates it', async () => {
    const jsm = await jetstreamManager(nc)
    await Promise.all([open('c1', 30), open('c1', 30), open('c1', 30)])
    let info = await jsm.streams.info(eventStreamName('c1'))
    expect(info.config.num_replicas).to.equal(3)
    expect(info.config.subjects).to.deep.equal(['beacon.events.c1.>'])
    expect(info.config.max_age).to.equal(30 * DAY_MS * 1e6)
    expect(info.config.max_bytes).to.equal(-1)
    await open('c1', 7, 1_000_000)
    info = await jsm.streams.info(eventStreamName('c1'))
    expect(info.config.max_age).to.equal(7 * DAY_MS * 1e6)
    expect(info.config.max_bytes).to.equal(1_000_000)
  })

  it('publishes each event under beacon.events.<cluster>.<account>.<visitor>.<profile>, JSON, stored once per Idempotency-Key', async () => {
    const events = await open('c2')
    const account = randomUUID()
    const visitor = randomUUID()
    await events.append(account, visitor, null, { event: 'pageView', token: 'secret', path: '/a' }, Date.UTC(2026, 10, 1), [], 'key-1')
    await events.append(account, visitor, null, { event: 'pageView', token: 'secret', path: '/a' }, Date.UTC(2026, 10, 1), [], 'key-1')
    await events.append(account, visitor, 'p.1@example.com', { event: 'purchase', total: 5 }, Date.UTC(2026, 10, 2), ['vip', 'buyers'], null)
    // What a downstream consumer reads from the stream (core NATS subscribers see retries too).
    const jsm = await jetstreamManager(nc)
    const info = await jsm.streams.info(eventStreamName('c2'), { subjects_filter: `beacon.events.c2.${account}.>` })
    const subjects = Object.keys(info.state.subjects ?? {}).sort()
    expect(subjects).to.deep.equal([`beacon.events.c2.${account}.${visitor}._`, `beacon.events.c2.${account}.${visitor}.${profileToken('p.1@example.com')}`].sort())
    const bodies = []
    for (const subject of [`beacon.events.c2.${account}.${visitor}._`, `beacon.events.c2.${account}.${visitor}.${profileToken('p.1@example.com')}`]) {
      expect(info.state.subjects?.[subject], subject).to.equal(1)
      bodies.push((await jsm.streams.getMessage(eventStreamName('c2'), { last_by_subj: subject }))?.json())
    }
    expect(bodies).to.deep.equal([
      { time: '2026-11-01T00:00:00.000Z', visitorId: visitor, kind: 'pageView', fields: { path: '/a' } },
      { time: '2026-11-02T00:00:00.000Z', visitorId: visitor, profileId: 'p.1@example.com', kind: 'purchase', fields: { total: 5 }, segments: ['vip', 'buyers'] },
    ])
    const page = await events.page(account, ALL, 10, null)
    expect(page.events.map(e => e.kind)).to.deep.equal(['purchase', 'pageView'])
    expect(page.events[0]!.segments).to.deep.equal(['vip', 'buyers'])
    expect(page.next).to.equal(null)
    events.close()
  })

  it('pages newest first across read windows, other accounts in between, with the filters, and exports oldest first', async () => {
    const events = await open('c3')
    const account = randomUUID()
    const other = randomUUID()
    const visitors = [randomUUID(), randomUUID()]
    const total = 1500
    const writes: Promise<void>[] = []
    for (let i = 0; i < total; i++) {
      const visitor = visitors[i % 2]!
      writes.push(events.append(account, visitor, i % 2 === 0 ? 'p-even' : null, { event: i % 3 === 0 ? 'purchase' : 'pageView', n: i }, 1_000_000 + i, []))
      writes.push(events.append(other, randomUUID(), null, { event: 'pageView', n: i }, 1_000_000 + i, []))
      if (writes.length >= 200) await Promise.all(writes.splice(0))
    }
    await Promise.all(writes)
    const everything = await allPages(events, account, ALL, 97)
    expect(everything.map(e => e.fields.n)).to.deep.equal(Array.from({ length: total }, (_, i) => total - 1 - i))
    const ofVisitor = await allPages(events, account, { ...ALL, visitorId: visitors[1]! }, 50)
    expect(ofVisitor.map(e => e.fields.n)).to.deep.equal(Array.from({ length: total / 2 }, (_, i) => total - 1 - 2 * i))
    const ofProfile = await allPages(events, account, { ...ALL, profileId: 'p-even' }, 1000)
    expect(ofProfile.every(e => e.profileId === 'p-even' && e.visitorId === visitors[0])).to.equal(true)
    expect(ofProfile).to.have.length(total / 2)
    const purchases = await allPages(events, account, { ...ALL, kind: 'purchase', fromMs: 1_000_000 + 300, toMs: 1_000_000 + 600 }, 1000)
    expect(purchases.map(e => e.fields.n)).to.deep.equal(Array.from({ length: 100 }, (_, i) => 597 - 3 * i))
    const exported: LoggedEvent[] = []
    for await (const batch of events.range(account, ALL)) exported.push(...batch)
    expect(exported.map(e => e.fields.n)).to.deep.equal(Array.from({ length: total }, (_, i) => i))
    expect(exported.map(e => e.id)).to.deep.equal(everything.map(e => e.id).reverse())
    events.close()
  })

  it('erases a visitor\'s and a profile\'s events by subject purge, and keeps the others', async () => {
    const events = await open('c4')
    const account = randomUUID()
    const [gone, linked, kept] = [randomUUID(), randomUUID(), randomUUID()]
    await Promise.all([
      events.append(account, gone, null, { event: 'pageView' }, 1000, []),
      events.append(account, gone, 'person', { event: 'purchase' }, 1001, []),
      events.append(account, linked, 'person', { event: 'purchase' }, 1002, []),
      events.append(account, linked, null, { event: 'pageView' }, 1003, []),
      events.append(account, kept, 'someone else', { event: 'pageView' }, 1004, []),
    ])
    expect(await events.forget(account, new Set([gone]), new Set(['person']))).to.equal(3)
    const left = await allPages(events, account, ALL, 100)
    expect(left.map(e => [e.visitorId, e.profileId ?? null])).to.deep.equal([[kept, 'someone else'], [linked, null]])
    events.close()
  })

  it('drops the oldest events once the stream is over BEACON_EVENT_LOG_MAX_BYTES', async () => {
    const events = await open('c5', 30, 64 * 1024)
    const account = randomUUID()
    const padding = 'x'.repeat(500)
    for (let i = 0; i < 400; i += 50) {
      await Promise.all(Array.from({ length: 50 }, (_, j) => events.append(account, randomUUID(), null, { event: 'pageView', n: i + j, padding }, 1000 + i + j, [])))
    }
    const left = await allPages(events, account, ALL, 1000)
    expect(left.length).to.be.above(0).and.below(400)
    // The newest kept, the oldest dropped.
    expect(left.map(e => e.fields.n)).to.deep.equal(Array.from({ length: left.length }, (_, i) => 399 - i))
    const info = await (await jetstreamManager(nc)).streams.info(eventStreamName('c5'))
    expect(info.state.bytes).to.be.at.most(64 * 1024)
    events.close()
  })
})
