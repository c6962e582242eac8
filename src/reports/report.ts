// A report read back from the folded buckets: one row per hour or day of the range (empty ones too,
// so a chart has no gaps), as JSON or as long-format CSV (t,kind,key,value).

import { assert } from '../assert.js'
import type { Store } from '../store/store.js'
import { DAY_MS, EMPTY_BUCKET, HOUR_MS, mergeBuckets, type ReportCounters, type StoredBucket } from './counters.js'
import { HyperLogLog } from './hll.js'
import { LATENCY_BUCKETS, percentile } from './latency.js'
import type { Granularity, ReportRow } from './report-shape.js'

/** The longest range per granularity, in days. */
export const RANGE_MAX_DAYS: Readonly<Record<Granularity, number>> = { hour: 31, day: 366 }

export function bucketStart (ms: number, granularity: Granularity): number {
  const size = granularity === 'hour' ? HOUR_MS : DAY_MS
  return ms - ((ms % size) + size) % size
}

/** Rows for every bucket that starts in [fromMs, toMs), the first one being the bucket holding fromMs. */
export function readReport (store: Store, account: string, fromMs: number, toMs: number, granularity: Granularity): ReportRow[] {
  return reportRows(storedBuckets(store, account, fromMs, toMs, granularity), fromMs, toMs, granularity)
}

/** The folded buckets of the account that start in [bucketStart(fromMs), toMs), by start. */
export function storedBuckets (store: Store, account: string, fromMs: number, toMs: number, granularity: Granularity): Map<number, StoredBucket> {
  const stored = new Map<number, StoredBucket>()
  for (const { key, value } of store.reports.getRange({ start: [account, granularity, bucketStart(fromMs, granularity)], end: [account, granularity, toMs] })) {
    const startMs = (key as [string, string, number])[2]
    // Folds write buckets at their hour's or day's start (counters.ts): any other key is not ours.
    assert(Number.isInteger(startMs) && bucketStart(startMs, granularity) === startMs, 'a stored report bucket starts on its granularity', { account, granularity, startMs })
    stored.set(startMs, value as StoredBucket)
  }
  return stored
}

/**
 * This node's buckets of the account starting in [bucketStart(fromMs), toMs): the folded ones and what
 * it counted since, read after any fold under way committed, so every count is in exactly one of them.
 */
export async function localBuckets (counters: Pick<ReportCounters, 'settled' | 'pending'>, store: Store, account: string, fromMs: number, toMs: number, granularity: Granularity): Promise<Map<number, StoredBucket>> {
  await counters.settled()
  const buckets = storedBuckets(store, account, fromMs, toMs, granularity)
  for (const [startMs, bucket] of counters.pending(account, granularity, bucketStart(fromMs, granularity), toMs)) {
    buckets.set(startMs, mergeBuckets(buckets.get(startMs) ?? EMPTY_BUCKET, bucket))
  }
  return buckets
}

/** One row per bucket starting in [bucketStart(fromMs), toMs), empty ones included. */
export function reportRows (buckets: ReadonlyMap<number, StoredBucket>, fromMs: number, toMs: number, granularity: Granularity): ReportRow[] {
  const size = granularity === 'hour' ? HOUR_MS : DAY_MS
  const rows: ReportRow[] = []
  for (let t = bucketStart(fromMs, granularity); t < toMs; t += size) rows.push(rowOf(t, buckets.get(t)))
  return rows
}

function rowOf (t: number, bucket: StoredBucket | undefined): ReportRow {
  const latency = bucket?.latency ?? null
  assert(latency === null || latency.length === LATENCY_BUCKETS, 'a stored latency histogram has LATENCY_BUCKETS buckets', { t, length: latency?.length, expected: LATENCY_BUCKETS })
  return {
    t: new Date(t).toISOString(),
    events: Object.fromEntries(bucket?.events ?? []),
    visitors: bucket?.visitors == null ? 0 : new HyperLogLog(bucket.visitors).estimate(),
    campaigns: Object.fromEntries((bucket?.campaigns ?? []).map(([id, impressions, views, clicks]) => [id, { impressions, views, clicks }])),
    segments: Object.fromEntries((bucket?.segments ?? []).map(([name, enter, exit]) => [name, { enter, exit }])),
    deliveries: {
      delivered: bucket?.deliveries[0] ?? 0,
      failed: bucket?.deliveries[1] ?? 0,
      dead: bucket?.deliveries[2] ?? 0,
      p50Ms: latency === null ? null : percentile(latency, 0.5),
      p95Ms: latency === null ? null : percentile(latency, 0.95),
      p99Ms: latency === null ? null : percentile(latency, 0.99),
    },
  }
}

/** Long format: one line per number, `t,kind,key,value`; kinds are events, visitors, campaign.impressions|views|clicks, segment.enter|exit, deliveries.<field>. */
export function reportCsv (rows: readonly ReportRow[]): string {
  const lines = ['t,kind,key,value']
  const line = (t: string, kind: string, key: string, value: number | null): void => {
    if (value !== null) lines.push(`${t},${kind},${csvField(key)},${value}`)
  }
  for (const row of rows) {
    for (const [kind, n] of Object.entries(row.events)) line(row.t, 'events', kind, n)
    line(row.t, 'visitors', '', row.visitors)
    for (const [id, c] of Object.entries(row.campaigns)) {
      line(row.t, 'campaign.impressions', id, c.impressions)
      line(row.t, 'campaign.views', id, c.views)
      line(row.t, 'campaign.clicks', id, c.clicks)
    }
    for (const [name, c] of Object.entries(row.segments)) {
      line(row.t, 'segment.enter', name, c.enter)
      line(row.t, 'segment.exit', name, c.exit)
    }
    for (const [field, value] of Object.entries(row.deliveries)) line(row.t, `deliveries.${field}`, '', value)
  }
  return lines.join('\r\n') + '\r\n'
}

/** RFC 4180 quoting when needed; a leading = + - @ is prefixed with ' so a spreadsheet never runs it as a formula. */
export function csvField (text: string): string {
  const safe = /^[=+\-@]/.test(text) ? `'${text}` : text
  return /[",\r\n]/.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe
}
