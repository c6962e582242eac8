// The one manual clock of the tests: time moves only when a test says so, so windows, caps, sessions,
// retries and schedules are driven without sleeping. It is a real Clock (src/clock.ts), injected as is.

import type { Clock } from '../../src/clock.js'

/** A fixed, arbitrary start (a Monday noon, UTC) for tests whose expectations name dates. */
export const TEST_START_MS = Date.UTC(2026, 0, 5, 12)

export class ManualClock implements Clock {
  /** Now, in ms since the epoch; a test may set it directly. */
  ms: number

  constructor (startMs = Date.now()) {
    this.ms = startMs
  }

  nowMs (): number {
    return this.ms
  }

  advance (ms: number): void {
    this.ms += ms
  }
}

/** A manual clock starting at TEST_START_MS unless told otherwise. */
export function manualClock (startMs = TEST_START_MS): ManualClock {
  return new ManualClock(startMs)
}
