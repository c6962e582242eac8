// Sign-in attempts are limited per email and per client address: past the limit within the window,
// every attempt (even with the right password) gets 429 with Retry-After until the window ends. Only
// failures count; a success clears the email's count. Bounded memory: the table is cleared of stale
// windows when it grows past its bound.

export const SIGN_IN_LIMITS = {
  windowMs: 15 * 60_000,
  perEmail: 5,
  perAddress: 20,
  /** Entries kept at most (emails and addresses together). */
  entriesMax: 100_000,
} as const

interface Window {
  startMs: number
  failures: number
}

export class SignInLimit {
  private readonly windows = new Map<string, Window>()

  /** 0 when an attempt is allowed now, else the milliseconds until it would be. */
  waitMs (email: string, address: string, nowMs: number): number {
    return Math.max(this.blockedMs('e:' + email, SIGN_IN_LIMITS.perEmail, nowMs), this.blockedMs('a:' + address, SIGN_IN_LIMITS.perAddress, nowMs))
  }

  failed (email: string, address: string, nowMs: number): void {
    this.count('e:' + email, nowMs)
    this.count('a:' + address, nowMs)
  }

  succeeded (email: string): void {
    this.windows.delete('e:' + email)
  }

  private blockedMs (key: string, max: number, nowMs: number): number {
    const window = this.windows.get(key)
    if (window === undefined || nowMs - window.startMs >= SIGN_IN_LIMITS.windowMs || window.failures < max) return 0
    return window.startMs + SIGN_IN_LIMITS.windowMs - nowMs
  }

  private count (key: string, nowMs: number): void {
    const window = this.windows.get(key)
    if (window !== undefined && nowMs - window.startMs < SIGN_IN_LIMITS.windowMs) {
      window.failures++
      return
    }
    if (this.windows.size >= SIGN_IN_LIMITS.entriesMax) this.dropStale(nowMs)
    this.windows.set(key, { startMs: nowMs, failures: 1 })
  }

  private dropStale (nowMs: number): void {
    for (const [key, window] of this.windows) if (nowMs - window.startMs >= SIGN_IN_LIMITS.windowMs) this.windows.delete(key)
    // Still full (an attack from many addresses): the oldest half goes; Map keeps insertion order.
    if (this.windows.size >= SIGN_IN_LIMITS.entriesMax) {
      let drop = this.windows.size / 2
      for (const key of this.windows.keys()) {
        if (drop-- <= 0) break
        this.windows.delete(key)
      }
    }
  }
}
