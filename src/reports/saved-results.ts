// A saved report's result as of now, the one thing both `GET …/saved-reports/{id}/result` and a
// scheduled delivery of it (docs/reports.md, "Delivery to a webhook") compute: the account's columns,
// first rid of the rows the log no longer keeps, then one pass over them (saved-query.ts).

import type { Clock } from '../clock.js'
import { ApiError } from '../errors.js'
import type { Store } from '../store/store.js'
import { KEY_PART_MAX } from '../store/store.js'
import type { SavedReport } from './saved-definition.js'
import type { SavedReportIndex } from './saved-index.js'
import { runSavedReport, type SavedResult } from './saved-query.js'

export interface SavedResultsOptions {
  index: SavedReportIndex
  /**
   * The time of the account's oldest event the log still holds (what retention and the size cap left),
   * or null when it holds none: this folder's log (`oldestLogged`), the cluster's stream's oldest message.
   */
  oldestKeptMs: (account: string) => number | null
  clock: Clock
  /** BEACON_EVENT_RETENTION_DAYS in ms: an account with nothing left in the log keeps only this window. */
  retentionMs: number
}

export class SavedResults {
  private readonly index: SavedReportIndex
  private readonly oldestKeptMs: (account: string) => number | null
  private readonly clock: Clock
  private readonly retentionMs: number

  constructor ({ index, oldestKeptMs, clock, retentionMs }: SavedResultsOptions) {
    this.index = index
    this.oldestKeptMs = oldestKeptMs
    this.clock = clock
    this.retentionMs = retentionMs
  }

  /** False while the log is still being loaded after a start. */
  get ready (): boolean { return this.index.ready }

  /** The report's result now; reports_loading (503) while the log is still being loaded after a start. */
  of (account: string, report: SavedReport): SavedResult {
    if (!this.index.ready) throw new ApiError('reports_loading', undefined, undefined, { 'Retry-After': '2' })
    this.compact(account)
    return runSavedReport(report, this.index.of(account), this.clock.nowMs())
  }

  /** The accounts that have columns. */
  accounts (): string[] {
    return this.index.accountIds()
  }

  /** Drops the account's rows the log no longer keeps (trimmed, erased); nothing while the log loads. */
  compact (account: string): void {
    if (!this.index.ready) return
    // The log's oldest row (committed) bounds what is kept; rows appended but not committed yet are newer.
    this.index.of(account)?.compact(this.oldestKeptMs(account) ?? this.clock.nowMs() - this.retentionMs)
  }
}

/** Embedded mode: the time of the account's oldest event in this folder's log, or null when none. */
export function oldestLogged (store: Store): (account: string) => number | null {
  return account => {
    const [first] = Array.from(store.events.getKeys({ start: [account], end: [account, KEY_PART_MAX], limit: 1 }))
    return first === undefined ? null : (first as [string, number])[1]
  }
}

/**
 * Every `everyMs` (the log's trim period), a pass compacting each account's columns, one account an
 * event-loop turn: the memory they take follows the log's retention even when no report is read.
 * Returns what stops it.
 */
export function compactSavedReports (results: SavedResults, everyMs: number, onError: (error: unknown) => void): () => void {
  let stopped = false
  let timer: NodeJS.Timeout | null = null
  const pass = (left: string[]): void => {
    timer = null
    if (stopped) return
    const account = left.pop()
    if (account === undefined) {
      timer = setTimeout(() => { pass(results.accounts()) }, everyMs).unref()
      return
    }
    try {
      results.compact(account)
    } catch (error) {
      onError(error)
    }
    setImmediate(() => { pass(left) })
  }
  timer = setTimeout(() => { pass(results.accounts()) }, everyMs).unref()
  return () => {
    stopped = true
    if (timer !== null) clearTimeout(timer)
  }
}
