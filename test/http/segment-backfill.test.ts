// Segment backfills (docs/event-log.md, "Backfilling a segment"): a computed segment saved with `backfill: true`
// is evaluated over the retained event log. Each test feeds one seeded history to two in-process
// Beacons sharing one manual clock: one had the segments from the start (the from-scratch evaluation),
// the other gets them at the end with a backfill; every visitor's segments must be the same. Real HTTP,
// real LMDB, a real audience webhook receiver.

import { expect } from 'chai'
import { admin, createTenant, post, removeDir, tempDir, visitorId, type Tenant } from '../helpers/beacon.js'
import { audienceSink, startInProcess, type InProcess } from '../helpers/in-process.js'
import { manualClock, type ManualClock } from '../helpers/clock.js'
import { expectError } from '../helpers/errors.js'
import { until } from '../helpers/until.js'

const DAY_MS = 86_400_000
// A backfill's walk lasts at least BEACON_BACKFILL_SETTLE_MS: long enough here for a test to see it running
// (and stop or change it) however slow the machine.
const ENV = { BEACON_EVENT_RETENTION_DAYS: '60', BEACON_BACKFILL_SETTLE_MS: '8000' }

const SEGMENTS: Record<string, unknown> = {
  recent: { fact: 'count', event: 'purchase', within: '30d', op: 'gte', value: 2 },
  exactly2: { fact: 'count', event: 'purchase', within: '30d', op: 'eq', value: 2 },
  spent: { fact: 'sum', event: 'purchase', field: 'orderTotal', within: '7d', op: 'gte', value: 100 },
  ever3: { all: [{ fact: 'count', event: 'purchase', op: 'gte', value: 3 }, { fact: 'count', event: 'pageView', within: '14d', op: 'gte', value: 1 }] },
}
const NAMES = Object.keys(SEGMENTS)

interface Backfill { id: string, state: string, events: number, visitors: number, members: number, walked: boolean, error: string | null }

/** A small deterministic generator (mulberry32): the same history for both Beacons and every run. */
function random (seed: number): () => number {
  return () => {
    seed = (seed + 0x6D2B79F5) | 0
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** Events by day over `days` days: purchases (some orderIds repeated) and page views. */
function history (visitors: string[], perVisitor: number, days: number, seed: number): Record<string, unknown>[][] {
  const next = random(seed)
  const byDay: Record<string, unknown>[][] = Array.from({ length: days }, () => [])
  for (const who of visitors) {
    for (let i = 0; i < perVisitor; i++) {
      const day = Math.floor(next() * days)
      const event = next() < 0.4
        ? { visitorId: who, platform: 'web', event: 'purchase', orderId: `${who.slice(0, 8)}-${Math.floor(next() * 8)}`, orderTotal: 1 + Math.floor(next() * 80) }
        : { visitorId: who, platform: 'web', event: 'pageView', path: '/p' }
      byDay[day]!.push(event)
    }
  }
  return byDay
}

describe('PUT /admin/accounts/{account}/segments/{name} with backfill: true', function () {
  this.timeout(240_000)
  let clock: ManualClock
  let scratch: InProcess
  let backfilled: InProcess
  let tenants: Tenant[]
  beforeEach(async () => {
    clock = manualClock()
    scratch = await startInProcess(undefined, ENV, clock)
    backfilled = await startInProcess(undefined, ENV, clock)
    tenants = await Promise.all([scratch, backfilled].map(beacon => createTenant(beacon.url)))
    // The Beacon evaluated from scratch has the segments before any event.
    for (const name of NAMES) {
      const res = await admin(scratch.url, 'PUT', `/admin/accounts/${tenants[0]!.account}/segments/${name}`, { rule: SEGMENTS[name] })
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
    }
  })
  afterEach(async () => {
    await scratch?.close()
    await backfilled?.close()
  })

  /** Send the same events to both Beacons (a batch of at most 500 each). */
  const sendBoth = async (events: Record<string, unknown>[]): Promise<void> => {
    for (let at = 0; at < events.length; at += 500) {
      const chunk = events.slice(at, at + 500)
      await Promise.all([scratch, backfilled].map(async (beacon, i) => {
        const res = await post(beacon.url, '/events/batch', { account: tenants[i]!.account, events: chunk })
        expect(res.status, JSON.stringify(res.body)).to.equal(200)
        expect(res.body.results.every((r: { status: number }) => r.status === 200), JSON.stringify(res.body.results.find((r: { status: number }) => r.status !== 200))).to.equal(true)
      }))
    }
  }
  const seed = async (visitors: string[], perVisitor: number, days: number, seedNumber: number): Promise<number> => {
    let sent = 0
    for (const day of history(visitors, perVisitor, days, seedNumber)) {
      await sendBoth(day)
      sent += day.length
      clock.advance(DAY_MS)
    }
    return sent
  }
  const segmentsOf = async (beacon: InProcess, account: string, who: string): Promise<string[]> => {
    const res = await admin(beacon.url, 'GET', `/admin/accounts/${account}/visitors/${who}`)
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
    return [...res.body.computedSegments as string[]].sort()
  }
  /** Every visitor's computed segments on both, after both swept their expired windows. */
  const expectSameMembers = async (visitors: string[]): Promise<void> => {
    await scratch.beacon.sweepSegments()
    await backfilled.beacon.sweepSegments()
    let members = 0
    for (const who of visitors) {
      const expected = await segmentsOf(scratch, tenants[0]!.account, who)
      expect(await segmentsOf(backfilled, tenants[1]!.account, who), `visitor ${who}`).to.deep.equal(expected)
      members += expected.length
    }
    // The history puts visitors in and out of every segment: the comparison is not of empty lists.
    expect(members).to.be.above(visitors.length / 4)
  }
  const backfillOf = async (name: string, beacon = backfilled): Promise<Backfill> => {
    const res = await admin(beacon.url, 'GET', `/admin/accounts/${tenants[1]!.account}/segments/${name}/backfill`)
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
    return res.body
  }
  const putBackfill = (name: string): Promise<{ status: number, body: any }> =>
    admin(backfilled.url, 'PUT', `/admin/accounts/${tenants[1]!.account}/segments/${name}`, { rule: SEGMENTS[name], backfill: true })

  it('gives the members a from-scratch evaluation has, counting live events sent during it once, and fires audience webhooks only after it', async () => {
    const visitors = Array.from({ length: 200 }, () => visitorId())
    const sent = await seed(visitors, 25, 50, 7)
    const sink = await audienceSink(backfilled.url, tenants[1]!.account, NAMES)
    try {
      for (const name of NAMES) {
        const res = await putBackfill(name)
        expect(res.status, JSON.stringify(res.body)).to.equal(200)
        expect(res.body).to.deep.equal({ name, rule: SEGMENTS[name] })
      }
      // Live events while the backfills run (or right after): each must count once, as on the other
      // Beacon. Sent in the same millisecond as the saves, then a second later.
      const next = random(11)
      const live = visitors.filter(() => next() < 0.3).map((who, i) => ({ visitorId: who, platform: 'web', event: 'purchase', orderId: `live-${i}`, orderTotal: 60 }))
      await sendBoth(live.slice(0, 20))
      clock.advance(1000)
      await sendBoth(live.slice(20))
      await sendBoth(visitors.slice(0, 20).map(who => ({ visitorId: who, platform: 'web', event: 'pageView', path: '/live' })))
      for (const name of NAMES) await until(`the backfill of ${name} done`, async () => (await backfillOf(name)).state === 'done', 120_000)
      const done = await backfillOf('recent')
      // Every logged event before the cut was read once: the seeded ones and the 20 live ones of the
      // saves' millisecond (the later ones counted live).
      expect(done).to.deep.include({ events: sent + 20, visitors: visitors.length, walked: true, error: null })
      await expectSameMembers(visitors)
      // No audience webhook for what the backfill (and the live events during it) decided.
      expect(await sink.changes(0)).to.deep.equal([])
      // A change after it is heard: a new visitor's third purchase in days with a page view.
      const newcomer = visitorId()
      await sendBoth([1, 2, 3].map(n => ({ visitorId: newcomer, platform: 'web', event: 'purchase', orderId: `n-${n}`, orderTotal: 40 })))
      await sendBoth([{ visitorId: newcomer, platform: 'web', event: 'pageView', path: '/' }])
      const changes = await sink.changes(5)
      // (Its second purchase put it in exactly2, its third took it out.)
      expect(changes.sort()).to.deep.equal([`enter ever3 ${newcomer}`, `enter exactly2 ${newcomer}`, `enter recent ${newcomer}`, `enter spent ${newcomer}`, `exit exactly2 ${newcomer}`].sort())
      // Time moves on: both evaluate the same, the backfilled windows expiring as live ones do.
      clock.advance(8 * DAY_MS)
      await expectSameMembers(visitors)
    } finally {
      await sink.close()
    }
  })

  it('resumes after a restart from where it stood, each event counted once; a second backfill meanwhile is 409', async () => {
    const visitors = Array.from({ length: 100 }, () => visitorId())
    const sent = await seed(visitors, 100, 40, 3)
    const started = await putBackfill('recent')
    expect(started.status, JSON.stringify(started.body)).to.equal(200)
    const running = await backfillOf('recent')
    expect(running.state).to.equal('running')
    expect(running.walked, 'stopped before its walk ended').to.equal(false)
    expectError(await putBackfill('recent'), 'backfill_running')
    // Stopped mid-walk, started again on the same folder and clock.
    const dataDir = backfilled.dataDir
    await backfilled.beacon.stop()
    backfilled = await startInProcess(dataDir, ENV, clock)
    await until('the backfill done after the restart', async () => (await backfillOf('recent')).state === 'done', 120_000)
    const done = await backfillOf('recent')
    expect(done).to.deep.include({ id: running.id, events: sent, visitors: visitors.length, walked: true })
    // The segment not backfilled on this Beacon is left out of the comparison: the scratch one has them all.
    for (const name of NAMES.filter(name => name !== 'recent')) {
      const res = await putBackfill(name)
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
      await until(`the backfill of ${name} done`, async () => (await backfillOf(name)).state === 'done', 120_000)
    }
    await expectSameMembers(visitors)
  })

  it('rebuilds the windows of segments saved before without a backfill, whoever else counts them', async () => {
    const visitors = Array.from({ length: 100 }, () => visitorId())
    const account = tenants[1]!.account
    await seed(visitors, 30, 30, 13)
    // Saved without a backfill: their windows count from here on, the history before left out.
    for (const name of NAMES) expect((await admin(backfilled.url, 'PUT', `/admin/accounts/${account}/segments/${name}`, { rule: SEGMENTS[name] })).status).to.equal(200)
    await seed(visitors, 10, 10, 17)
    // Saved again with a backfill, one of them (its windows those of the others too) left as it was.
    const backfilledNames = NAMES.filter(name => name !== 'exactly2')
    for (const name of backfilledNames) expect((await putBackfill(name)).status).to.equal(200)
    for (const name of backfilledNames) await until(`the backfill of ${name} done`, async () => (await backfillOf(name)).state === 'done', 120_000)
    expect((await backfillOf('recent')).events).to.be.above(0)
    // exactly2 reads the shared windows, counting since its save: only the backfilled ones match.
    await scratch.beacon.sweepSegments()
    await backfilled.beacon.sweepSegments()
    let members = 0
    for (const who of visitors) {
      const expected = (await segmentsOf(scratch, tenants[0]!.account, who)).filter(name => name !== 'exactly2')
      expect((await segmentsOf(backfilled, account, who)).filter(name => name !== 'exactly2'), `visitor ${who}`).to.deep.equal(expected)
      members += expected.length
    }
    expect(members).to.be.above(visitors.length / 4)
  })

  it('cancels a running backfill when its segment is saved again without one, or deleted', async () => {
    const visitors = Array.from({ length: 100 }, () => visitorId())
    await seed(visitors, 100, 20, 5)
    expect((await putBackfill('recent')).status).to.equal(200)
    expect((await putBackfill('spent')).status).to.equal(200)
    const account = tenants[1]!.account
    const changed = await admin(backfilled.url, 'PUT', `/admin/accounts/${account}/segments/recent`, { rule: SEGMENTS.exactly2 })
    expect(changed.status, JSON.stringify(changed.body)).to.equal(200)
    expect((await admin(backfilled.url, 'DELETE', `/admin/accounts/${account}/segments/spent`)).status).to.equal(200)
    const recent = await backfillOf('recent')
    expect(recent).to.deep.include({ state: 'cancelled', error: 'The segment was changed.' })
    expectError(await admin(backfilled.url, 'GET', `/admin/accounts/${account}/segments/spent/backfill`), 'segment_not_found')
    // Another backfill of the changed segment may start at once.
    expect((await putBackfill('recent')).status).to.equal(200)
    await until('the new backfill done', async () => (await backfillOf('recent')).state === 'done', 120_000)
  })

  it('never counts nor brings back an erased visitor', async () => {
    const visitors = Array.from({ length: 50 }, () => visitorId())
    const sent = await seed(visitors, 40, 20, 9)
    const account = tenants[1]!.account
    const [before, during] = [visitors[0]!, visitors[1]!]
    const logged = async (who: string): Promise<number> => (await admin(backfilled.url, 'GET', `/admin/accounts/${account}/events?visitorId=${who}&limit=1000`)).body.events.length
    const erasedBefore = await logged(before)
    expect((await admin(backfilled.url, 'DELETE', `/admin/accounts/${account}/visitors/${before}`)).status).to.equal(200)
    expect((await putBackfill('recent')).status).to.equal(200)
    expect((await admin(backfilled.url, 'DELETE', `/admin/accounts/${account}/visitors/${during}`)).status).to.equal(200)
    await until('the backfill done', async () => (await backfillOf('recent')).state === 'done', 120_000)
    // The first one's events had left the log; the second one may have been read before its erasure.
    expect((await backfillOf('recent')).events).to.be.at.most(sent - erasedBefore)
    for (const who of [before, during]) {
      expect(backfilled.beacon.store.visitors.get([account, who]), `${who}'s row`).to.equal(undefined)
      const seen = await admin(backfilled.url, 'GET', `/admin/accounts/${account}/visitors/${who}`)
      expect(seen.body, who).to.deep.include({ firstSeen: null, counts: {}, computedSegments: [] })
      expect(await logged(who)).to.equal(0)
    }
  })

  it('refuses bad input with 400, unknown segments and backfills with 404, and changes nothing', async () => {
    const account = tenants[1]!.account
    const path = `/admin/accounts/${account}/segments/vip`
    expectError(await admin(backfilled.url, 'PUT', path, { rule: SEGMENTS.recent, backfill: 'yes' }), 'invalid_segment', '/backfill')
    expectError(await admin(backfilled.url, 'PUT', path, { description: 'manual', backfill: true }), 'invalid_segment', '/backfill')
    expectError(await admin(backfilled.url, 'PUT', path, { rule: { fact: 'count', event: 'purchase', op: 'gte' }, backfill: true }), 'invalid_segment', '/rule/value')
    expectError(await admin(backfilled.url, 'PUT', path, { rule: SEGMENTS.recent, backfill: true, extra: 1 }), 'invalid_segment', '/extra')
    expectError(await admin(backfilled.url, 'GET', path), 'segment_not_found')
    expectError(await admin(backfilled.url, 'GET', `${path}/backfill`), 'segment_not_found')
    expect((await admin(backfilled.url, 'PUT', path, { rule: SEGMENTS.recent })).status).to.equal(200)
    expectError(await admin(backfilled.url, 'GET', `${path}/backfill`), 'backfill_not_found')
    expectError(await admin(backfilled.url, 'PUT', `/admin/accounts/${visitorId()}/segments/vip`, { rule: SEGMENTS.recent, backfill: true }), 'account_not_found')
  })

  it('answers 501 event_log_not_kept without a log (retention 0), saving nothing', async () => {
    const dir = tempDir()
    const off = await startInProcess(dir, { BEACON_EVENT_RETENTION_DAYS: '0' })
    try {
      const tenant = await createTenant(off.url)
      const path = `/admin/accounts/${tenant.account}/segments/vip`
      expectError(await admin(off.url, 'PUT', path, { rule: SEGMENTS.recent, backfill: true }), 'event_log_not_kept')
      expectError(await admin(off.url, 'GET', path), 'segment_not_found')
    } finally {
      await off.close()
      removeDir(dir)
    }
  })
})
