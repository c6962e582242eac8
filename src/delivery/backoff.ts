// Retry delays: exponential with equal jitter. Half of each step is fixed, so retries never bunch up
// near zero; the other half is random, so many webhooks failing together spread out.
//
// Factor 4 rather than doubling: with the default maxAttempts of 8, doubling would give up about two
// minutes after the first failure, shorter than a typical receiver deploy or outage; factor 4 keeps
// trying for 41 to 83 minutes. The schedule table is in docs/webhooks.md (Retry schedule).

export const BACKOFF = {
  baseMs: 1000,
  factor: 4,
  capMs: 3_600_000,
} as const

/**
 * Delay before the next attempt, after attempt number `attempt` (1-based) failed.
 * `random` is a number in [0, 1) (Math.random() in production, fixed in tests).
 */
export function retryDelayMs (attempt: number, random: number): number {
  const exponent = Math.max(0, Math.min(attempt - 1, 30))
  const stepMs = Math.min(BACKOFF.capMs, BACKOFF.baseMs * BACKOFF.factor ** exponent)
  const half = stepMs / 2
  return Math.round(half + clampUnit(random) * half)
}

function clampUnit (n: number): number {
  return Number.isFinite(n) ? Math.min(Math.max(n, 0), 1) : 0
}
