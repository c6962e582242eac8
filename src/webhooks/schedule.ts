// Schedules of timed webhooks: `every` ("30s", "15m", "1h", "2d") or a cron pattern (croner, 5 or 6
// fields, evaluated in UTC so that every node of a cluster agrees on the next run).

import { Cron } from 'croner'
import { CONFIG_LIMITS } from './limits.js'

export type Schedule =
  | { kind: 'every', everyMs: number, source: string }
  | { kind: 'cron', cron: Cron, source: string }

const EVERY = /^([1-9][0-9]{0,6})(s|m|h|d)$/
const UNIT_MS: Readonly<Record<string, number>> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }

/** Runs of a cron pattern looked at to find its shortest interval. */
const CRON_RUNS_CHECKED = 8

/** Milliseconds of an `every` value, or an error message. */
export function parseEvery (text: string): number | string {
  const match = EVERY.exec(text)
  if (match === null) return 'every must be a whole number followed by s, m, h or d, like "30s", "15m" or "1h".'
  const ms = Number(match[1]) * (UNIT_MS[match[2] as string] as number)
  if (ms < CONFIG_LIMITS.scheduleIntervalMinMs || ms > CONFIG_LIMITS.scheduleIntervalMaxMs) {
    return `every must be from ${CONFIG_LIMITS.scheduleIntervalMinMs / 1000}s to ${CONFIG_LIMITS.scheduleIntervalMaxMs / 86_400_000}d.`
  }
  return ms
}

/** A paused croner job for the pattern (it never runs by itself: Beacon's scheduler asks nextRunMs), or an error message. */
export function parseCron (text: string): Cron | string {
  let cron: Cron
  try {
    cron = new Cron(text, { paused: true, timezone: 'UTC', mode: '5-or-6-parts' })
  } catch (err) {
    return `cron is not a valid pattern: ${(err as Error).message}`
  }
  const runs = cron.nextRuns(CRON_RUNS_CHECKED, new Date(Date.UTC(2025, 0, 1)))
  if (runs.length === 0) return 'cron never fires.'
  for (let i = 1; i < runs.length; i++) {
    const gapMs = (runs[i] as Date).getTime() - (runs[i - 1] as Date).getTime()
    if (gapMs < CONFIG_LIMITS.scheduleIntervalMinMs) return `cron fires more often than every ${CONFIG_LIMITS.scheduleIntervalMinMs / 1000}s.`
  }
  return cron
}

/**
 * The first run strictly after afterMs, or null if the schedule has no more runs. `every` runs are
 * aligned to the Unix epoch (multiples of everyMs), so they survive restarts and agree across nodes.
 */
export function nextRunMs (schedule: Schedule, afterMs: number): number | null {
  if (schedule.kind === 'every') return (Math.floor(afterMs / schedule.everyMs) + 1) * schedule.everyMs
  const next = schedule.cron.nextRun(new Date(afterMs))
  return next === null ? null : next.getTime()
}
