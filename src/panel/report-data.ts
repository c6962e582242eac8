// The reports endpoint's answer, and its rows turned into chart series and totals.

import { accountPath, call } from './api'
import type { Series } from './chart'
import type { Granularity, Report, ReportRow } from '../reports/report-shape'

export function reportQuery (from: Date, to: Date, granularity: Granularity): string {
  return accountPath(`/reports?from=${encodeURIComponent(from.toISOString())}&to=${encodeURIComponent(to.toISOString())}&granularity=${granularity}`)
}

export const loadReport = (from: Date, to: Date, granularity: Granularity): Promise<Report> => call('GET', reportQuery(from, to, granularity))

/** One series per key found under `pick(row)` in any row, missing buckets as 0. */
export function seriesOf (rows: ReportRow[], pick: (row: ReportRow) => Record<string, number> | undefined): Series[] {
  const keys = new Set<string>()
  for (const row of rows) for (const key of Object.keys(pick(row) ?? {})) keys.add(key)
  return [...keys].sort().map(label => ({ label, values: rows.map(row => pick(row)?.[label] ?? 0) }))
}

/** Sum of every row's numbers under `pick(row)`, per key. */
export function totalsOf<T extends Record<string, number>> (rows: ReportRow[], pick: (row: ReportRow) => Record<string, T>): Map<string, Record<string, number>> {
  const totals = new Map<string, Record<string, number>>()
  for (const row of rows) {
    for (const [key, counts] of Object.entries(pick(row))) {
      const sum = totals.get(key) ?? {}
      for (const [name, n] of Object.entries(counts)) sum[name] = (sum[name] ?? 0) + n
      totals.set(key, sum)
    }
  }
  return totals
}

export const timesOf = (rows: ReportRow[]): number[] => rows.map(row => Date.parse(row.t))

export function lagNote (lagMs: number): string {
  return `Numbers may be up to ${Math.max(1, Math.ceil(lagMs / 1000))} s late.`
}
