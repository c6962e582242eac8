// Sign-in attempts are limited per email and per client address: past the limit within the window,
// every attempt (even with the right password) gets 429 with Retry-After until the window ends. Only
// failures count; a success clears the email's count. Here the windows are this process's (embedded
// mode): bounded memory, the table is cleared of stale windows when it grows past its bound. Cluster
// mode keeps the same windows where every node counts them (shared-sign-in-limit.ts).

export const SIGN_IN_LIMITS = {
  windowMs: 15 * 60_000,
  perEmail: 5,
  perAddress: 20,
  /** Entries kept at most (emails and addresses together). */
  entriesMax: 100_000,
} as const

export interface Window {
  startMs: number
  failures: number
}

/** What the sign-in route asks, of this process's windows or of the cluster's. */
export interface SignInLimiter {
  /** 0 when an attempt is allowed now, else the milliseconds until it would be. */
  waitMs (email: string, address: string, nowMs: number): number | Promise<number>
  failed (email: string, address: string, nowMs: number): void | Promise<void>
  succeeded (email: string): void | Promise<void>
}

/** How long a window of `max` failures blocks attempts from nowMs (0: not blocked). */
export function blockedMs (window: Window | null | undefined, max: number, nowMs: number): number {
  if (window == null || nowMs - window.startMs >= SIGN_IN_LIMITS.windowMs || window.failures < max) return 0
  return window.startMs + SIGN_IN_LIMITS.windowMs - nowMs
}

/** The window after one more failure at nowMs: counted in it, or a new one once it ended. */
export function counted (window: Window | null | undefined, nowMs: number): Window {
  return window != null && nowMs - window.startMs < SIGN_IN_LIMITS.windowMs ? { startMs: window.startMs, failures: window.failures + 1 } : { startMs: nowMs, failures: 1 }
}

export class SignInLimit implements SignInLimiter {
  private readonly windows = new Map<string, Window>()

  /** 0 when an attempt is allowed now, else the milliseconds until it would be. */
  waitMs (email: string, address: string, nowMs: number): number {
    return Math.max(blockedMs(this.windows.get('e:' + email), SIGN_IN_LIMITS.perEmail, nowMs), blockedMs(this.windows.get('a:' + address), SIGN_IN_LIMITS.perAddress, nowMs))
  }

  failed (email: string, address: string, nowMs: number): void {
    this.count('e:' + email, nowMs)
    this.count('a:' + address, nowMs)
  }

  succeeded (email: string): void {
    this.windows.delete('e:' + email)
  }

  private count (key: string, nowMs: number): void {
    const window = this.windows.get(key)
    if (window === undefined && this.windows.size >= SIGN_IN_LIMITS.entriesMax) this.dropStale(nowMs)
    this.windows.set(key, counted(window, nowMs))
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
