// How long to wait before a retry: the server's Retry-After when it gave one (seconds, capped), else
// exponential backoff with full jitter (a random wait up to base × 2^(attempt−1), capped), so that
// clients refused together do not come back together.

export interface BackoffOptions {
  baseMs: number
  maxMs: number
  /** A Retry-After longer than this is waited only this long (the attempts are bounded anyway). */
  retryAfterMaxMs: number
}

/** The wait before attempt `attempt + 1` after attempt `attempt` (from 1) failed; `random` in [0, 1). */
export function retryDelayMs (attempt: number, retryAfter: string | string[] | undefined, options: BackoffOptions, random: () => number): number {
  const seconds = retryAfterSeconds(retryAfter)
  // The server's wait, and a little jitter above it (never below: it said not before then).
  if (seconds !== null) return Math.min(options.retryAfterMaxMs, seconds * 1000) + random() * options.baseMs
  const ceiling = Math.min(options.maxMs, options.baseMs * 2 ** (attempt - 1))
  return random() * ceiling
}

/** Retry-After as delta-seconds (what Beacon sends); an HTTP date is read too. Null when absent or unreadable. */
function retryAfterSeconds (header: string | string[] | undefined): number | null {
  const value = Array.isArray(header) ? header[0] : header
  if (value === undefined || value === '') return null
  if (/^\d+$/.test(value)) return Number(value)
  const at = Date.parse(value)
  return Number.isNaN(at) ? null : Math.max(0, (at - Date.now()) / 1000)
}
