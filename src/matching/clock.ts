// Time facts derived from nowMs with integer arithmetic: no Date allocated per event.

const HOUR_MS = 3_600_000
const DAY_MS = 86_400_000

// JS `%` keeps the sign of the dividend; facts must stay in range for instants before 1970 too.
function mod (a: number, n: number): number {
  const r = a % n
  return r < 0 ? r + n : r
}

/** 0..23, UTC. */
export function utcHour (nowMs: number): number {
  return mod(Math.floor(nowMs / HOUR_MS), 24)
}

/** 0 = Sunday .. 6 = Saturday, UTC. Day 0 of the epoch (1970-01-01) was a Thursday. */
export function utcWeekday (nowMs: number): number {
  return mod(Math.floor(nowMs / DAY_MS) + 4, 7)
}

/** Whole seconds from `thenMs` to `nowMs`, rounded down (negative if `thenMs` is ahead). */
export function secondsAgo (nowMs: number, thenMs: number): number {
  return Math.floor((nowMs - thenMs) / 1000)
}
