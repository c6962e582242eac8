// Retry-After (RFC 9110 §10.2.3): delay-seconds or an HTTP-date. Parsed once per retryable response.

import { DELIVERY_LIMITS } from './limits.js'

const DELAY_SECONDS = /^\d{1,10}$/
// Every HTTP-date form starts with a day name; Date.parse alone would take "-5" as a year.
const HTTP_DATE_START = /^[A-Za-z]{3}/

/** The delay the receiver asked for, in ms, capped at retryAfterMaxMs; undefined when absent or unreadable. */
export function parseRetryAfterMs (header: string | string[] | undefined, nowMs: number): number | undefined {
  const value = (Array.isArray(header) ? header[0] : header)?.trim()
  if (value === undefined || value === '') return undefined
  let delayMs: number
  if (DELAY_SECONDS.test(value)) {
    delayMs = Number(value) * 1000
  } else {
    if (!HTTP_DATE_START.test(value)) return undefined
    const at = Date.parse(value)
    if (Number.isNaN(at)) return undefined
    delayMs = Math.max(0, at - nowMs)
  }
  return Math.min(delayMs, DELIVERY_LIMITS.retryAfterMaxMs)
}
