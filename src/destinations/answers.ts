// What providers' answers share: the HTTP status classes (2xx delivered; 408, 429 and 5xx retried with
// Retry-After honoured; other 4xx final), JSON bodies read without throwing, excerpts for the log.

import { parseRetryAfterMs } from '../webhooks/retry-after.js'
import type { ProviderAnswer } from './http.js'
import type { ProviderOutcome } from './provider.js'

export function isRetryableStatus (status: number): boolean {
  return status === 408 || status === 429 || status >= 500
}

/** The answer's JSON, or null when it is not JSON. */
export function jsonOf (answer: ProviderAnswer): unknown {
  try {
    return JSON.parse(answer.body)
  } catch {
    return null
  }
}

/** The outcome the status alone decides; `retry` forces a retry (a provider's throttling code on a 4xx). */
export function outcomeOf (answer: ProviderAnswer, request: string, nowMs: number, error?: string, retry = false): ProviderOutcome {
  const status = answer.status
  if (status >= 200 && status < 300 && !retry) {
    const delivered: ProviderOutcome = { outcome: 'delivered', status, request, answer: answer.body }
    if (error !== undefined) delivered.error = error
    return delivered
  }
  const retryable = retry || isRetryableStatus(status)
  const outcome: ProviderOutcome = { outcome: retryable ? 'retry' : 'terminal', status, request, answer: answer.body, error: error ?? `HTTP ${status}: ${answer.body.replace(/\s+/g, ' ').slice(0, 300)}` }
  if (retryable) {
    const retryAfterMs = parseRetryAfterMs(answer.headers['retry-after'], nowMs)
    if (retryAfterMs !== undefined) outcome.retryAfterMs = retryAfterMs
  }
  return outcome
}
