// Saved reports over a large retained log (docs/reports.md, "How it is computed"): the time of each
// kind of report over N events (default 10 million, 30 days, 300,000 visitors) held as the in-memory
// columns of src/reports/saved-index.ts, beside the baseline of the same run: walking the log's LMDB
// rows (what computing a report from the log itself would cost), measured on a smaller log and scaled.
// Also: the rate the columns load from the log at start, what an event's add costs, and the memory.
//
//   node --import tsx bench/reports.ts          # BENCH_EVENTS=10000000 BENCH_LMDB_EVENTS=500000
//
// The target: every report ≤ 2 s over 10 million events on this machine (issue 30).

import { randomUUID } from 'node:crypto'
import { loadavg } from 'node:os'
import { open } from 'lmdb'
import { SavedReportIndex, type AccountColumns } from '../src/reports/saved-index.js'
import { runSavedReport } from '../src/reports/saved-query.js'
import type { SavedReport, SavedReportDefinition } from '../src/reports/saved-definition.js'
import type { StoredEvent } from '../src/store/event-log.js'
import { removeDir, tempDir } from '../test/helpers/beacon.js'

const EVENTS = Number(process.env.BENCH_EVENTS ?? 10_000_000)
const LMDB_EVENTS = Number(process.env.BENCH_LMDB_EVENTS ?? 500_000)
const VISITORS = 300_000
const DAYS = 30
const DAY_MS = 86_400_000
const END_MS = Date.parse('2026-11-27T00:00:00Z')
const START_MS = END_MS - DAYS * DAY_MS
const ACCOUNT = 'bench'
const PLATFORMS = ['web', 'ios', 'android']
const DEVICES = ['desktop', 'mobile', 'tablet']
/** The segments a visitor is in: none for half of them, one to three of these for the others (by the visitor's number / 1000: its low bits repeat). */
const SEGMENT_SETS: readonly string[][] = [[], ['returning'], [], ['returning', 'high-value'], [], ['newsletter'], [], ['returning', 'newsletter', 'cart-abandoners']]

/** A deterministic stream of typical events: kinds, platforms, paths, a quarter with a profile, half in segments. */
function * events (count: number): Generator<{ timeMs: number, visitorId: string, profileId: string | null, kind: string, fields: Record<string, unknown>, segments: string[] }> {
  const visitors = Array.from({ length: VISITORS }, () => randomUUID())
  let seed = 42
  const next = (): number => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed }
  const stepMs = (DAYS * DAY_MS) / count
  for (let i = 0; i < count; i++) {
    const v = next() % VISITORS
    const roll = next() % 100
    const kind = roll < 60 ? 'pageView' : roll < 85 ? 'productView' : roll < 92 ? 'addToCart' : roll < 96 ? 'campaignView' : 'purchase'
    const fields: Record<string, unknown> = { platform: PLATFORMS[v % 3], device: DEVICES[v % 5 % 3], path: `/p/${next() % 500}` }
    if (kind === 'purchase') {
      fields.orderId = `o-${i}`
      fields.orderTotal = 5 + (next() % 200)
    }
    if (kind === 'productView') fields.sku = `sku-${next() % 2000}`
    if (kind === 'campaignView') {
      fields.campaignId = `c-${next() % 20}`
      fields.variant = next() % 2 === 0 ? 'a' : 'b'
    }
    yield { timeMs: START_MS + Math.floor(i * stepMs), visitorId: visitors[v]!, profileId: v % 4 === 0 ? `person-${v}` : null, kind, fields, segments: SEGMENT_SETS[Math.floor(v / 1000) % SEGMENT_SETS.length]! }
  }
}

const range = { from: new Date(START_MS).toISOString(), to: new Date(END_MS).toISOString() }
const REPORTS: Array<[string, Omit<SavedReportDefinition, 'name' | 'range'> & { range?: SavedReportDefinition['range'] }]> = [
  ['events per day', { metric: { type: 'events' }, granularity: 'day' }],
  ['unique visitors per day', { metric: { type: 'uniqueVisitors' }, granularity: 'day' }],
  ['unique visitors per hour, last 7 days', { metric: { type: 'uniqueVisitors' }, granularity: 'hour', range: { from: new Date(END_MS - 7 * DAY_MS).toISOString(), to: range.to } }],
  ['unique visitors per day by platform', { metric: { type: 'uniqueVisitors' }, breakdown: { by: 'platform' }, granularity: 'day' }],
  ['unique visitors per week by path (500), pageView only', { metric: { type: 'uniqueVisitors' }, breakdown: { by: 'path' }, filters: [{ by: 'kind', values: ['pageView'] }], granularity: 'week' }],
  ['unique profiles per day by kind', { metric: { type: 'uniqueProfiles' }, breakdown: { by: 'kind' }, granularity: 'day' }],
  ['sum of orderTotal per day by device', { metric: { type: 'sum', field: 'orderTotal' }, breakdown: { by: 'device' }, granularity: 'day' }],
  ['events per day by sku (custom field), productView', { metric: { type: 'events' }, breakdown: { by: 'field', field: 'sku' }, filters: [{ by: 'kind', values: ['productView'] }], granularity: 'day' }],
  ['events per day by segment (an event in each of its 0 to 3)', { metric: { type: 'events' }, breakdown: { by: 'segment' }, granularity: 'day' }],
  ['unique visitors per day by segment, purchase only', { metric: { type: 'uniqueVisitors' }, breakdown: { by: 'segment' }, filters: [{ by: 'kind', values: ['purchase'] }], granularity: 'day' }],
  ['conversion productView → purchase in 24 h, by platform', { metric: { type: 'conversion', from: 'productView', to: 'purchase', windowHours: 24 }, breakdown: { by: 'platform' }, granularity: 'day' }],
]

function time<T> (work: () => T): [T, number] {
  const started = process.hrtime.bigint()
  const result = work()
  return [result, Number(process.hrtime.bigint() - started) / 1e6]
}

function main (): void {
  console.log(`# saved reports bench: ${EVENTS.toLocaleString('en-US')} events, ${DAYS} days, ${VISITORS.toLocaleString('en-US')} visitors`)
  console.log(`load average before: ${loadavg().map(n => n.toFixed(2)).join(' ')}`)

  // Baseline: the log's LMDB rows, written then walked (the rate a report read from the log would have).
  const dir = tempDir('beacon-bench-reports-')
  const root = open({ path: dir, mapSize: 4 * 1024 ** 3 })
  const db = root.openDB({ name: 'events', keyEncoding: 'ordered-binary', encoding: 'msgpack' })
  let seq = 0
  const writes: Array<Promise<boolean>> = []
  root.transactionSync(() => {
    for (const e of events(LMDB_EVENTS)) {
      const value: StoredEvent = e.profileId === null ? { visitorId: e.visitorId, kind: e.kind, fields: e.fields } : { visitorId: e.visitorId, profileId: e.profileId, kind: e.kind, fields: e.fields }
      if (e.segments.length > 0) value.segments = e.segments
      writes.push(db.put([ACCOUNT, e.timeMs, ++seq], value))
    }
  })
  const [walked, walkMs] = time(() => { let n = 0; for (const { value } of db.getRange({ start: [ACCOUNT], end: [ACCOUNT, Number.MAX_SAFE_INTEGER] })) if ((value as StoredEvent).kind !== '') n++; return n })
  const loading = new SavedReportIndex()
  const [loaded, loadMs] = time(() => loading.load(db))
  const walkPerS = walked / (walkMs / 1000)
  const loadPerS = loaded / (loadMs / 1000)
  console.log(`LMDB walk (baseline): ${walked.toLocaleString('en-US')} rows in ${walkMs.toFixed(0)} ms = ${Math.round(walkPerS).toLocaleString('en-US')} events/s → ${(EVENTS / walkPerS).toFixed(1)} s per report over ${EVENTS.toLocaleString('en-US')}`)
  console.log(`load into columns at start: ${Math.round(loadPerS).toLocaleString('en-US')} events/s → ${(EVENTS / loadPerS).toFixed(1)} s for ${EVENTS.toLocaleString('en-US')}`)
  root.close().catch(() => {}).finally(() => removeDir(dir))

  // The columns, filled as appends fill them.
  const index = new SavedReportIndex()
  globalThis.gc?.()
  const before = process.memoryUsage()
  const [, addMs] = time(() => { for (const e of events(EVENTS)) index.add(ACCOUNT, e.visitorId, e.profileId, { event: e.kind, ...e.fields }, e.timeMs, e.segments) })
  globalThis.gc?.()
  const after = process.memoryUsage()
  const columns = index.of(ACCOUNT) as AccountColumns
  console.log(`columns: ${columns.n.toLocaleString('en-US')} events; generating and adding took ${(addMs / 1000).toFixed(1)} s (${(addMs * 1e6 / EVENTS).toFixed(0)} ns per event, generation included)`)
  console.log(`memory: +${((after.arrayBuffers - before.arrayBuffers) / 1024 ** 2).toFixed(0)} MB typed arrays, +${((after.heapUsed - before.heapUsed) / 1024 ** 2).toFixed(0)} MB heap (dictionaries) = ${(((after.arrayBuffers - before.arrayBuffers) + (after.heapUsed - before.heapUsed)) / EVENTS).toFixed(0)} B per event`)

  console.log('')
  console.log('| report | ms (best of 3) | ms (worst) | events read | groups | vs LMDB walk |')
  console.log('|---|---:|---:|---:|---:|---:|')
  let worst = 0
  for (const [name, def] of REPORTS) {
    const report: SavedReport = { id: 'bench', name, range, ...def, createdAt: '', updatedAt: '' } as SavedReport
    const timings: number[] = []
    let result = runSavedReport(report, columns, END_MS)
    for (let round = 0; round < 3; round++) {
      const [answer, ms] = time(() => runSavedReport(report, columns, END_MS))
      result = answer
      timings.push(ms)
    }
    const best = Math.min(...timings)
    const slowest = Math.max(...timings)
    worst = Math.max(worst, slowest)
    const walkMsFull = EVENTS / walkPerS * 1000
    console.log(`| ${name} | ${best.toFixed(0)} | ${slowest.toFixed(0)} | ${result.eventsRead.toLocaleString('en-US')} | ${result.totals.length} | ${(walkMsFull / best).toFixed(0)}× faster |`)
  }
  console.log('')
  console.log(`slowest report: ${worst.toFixed(0)} ms; target ≤ 2000 ms: ${worst <= 2000 ? 'met' : 'MISSED'}`)
  console.log(`load average after: ${loadavg().map(n => n.toFixed(2)).join(' ')}`)
}

main()
