// Sign-in attempts are limited per email and per client address: past the limit within the window,
// every attempt (even with the right password) gets 429 with Retry-After until the window ends. An
// attempt is reserved before its password is checked and settled after (issue 27: checked before
// scrypt and counted after it, 60 attempts sent at once were all tried): at most the limit is ever
// being tried or failed within a window, however many arrive at once. A failure stays counted; a
// success gives its reservation back and clears the email's failures; an attempt refused before its
// password was checked (503 overloaded) gives its reservation back. Here the windows are this
// process's (embedded mode): bounded memory, the table is cleared of stale windows when it grows past
// its bound. Cluster mode keeps the same windows where every node counts them (shared-sign-in-limit.ts).

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
  /** Attempts reserved and not settled yet (absent in windows written before reservations). */
  pending?: number
}

/** How a reserved attempt ended. */
export type Outcome = 'failed' | 'succeeded' | 'untried'

/** What the sign-in route asks, of this process's windows or of the cluster's. */
export interface SignInLimiter {
  /** Reserves an attempt for the email and the address: 0 when reserved (settle it), else the milliseconds until one could be. */
  reserve (email: string, address: string, nowMs: number): number | Promise<number>
  settle (email: string, address: string, outcome: Outcome, nowMs: number): void | Promise<void>
}

function live (window: Window | null | undefined, nowMs: number): window is Window {
  return window != null && nowMs - window.startMs < SIGN_IN_LIMITS.windowMs
}

/** How long a window of `max` attempts (failed or being tried) blocks another from nowMs (0: not blocked). */
export function blockedMs (window: Window | null | undefined, max: number, nowMs: number): number {
  if (!live(window, nowMs) || window.failures + (window.pending ?? 0) < max) return 0
  return window.startMs + SIGN_IN_LIMITS.windowMs - nowMs
}

/** The window with one more attempt reserved at nowMs: in it, or in a new one once it ended. */
export function reserved (window: Window | null | undefined, nowMs: number): Window {
  return live(window, nowMs) ? { startMs: window.startMs, failures: window.failures, pending: (window.pending ?? 0) + 1 } : { startMs: nowMs, failures: 0, pending: 1 }
}

/**
 * The window once a reserved attempt is settled (null: nothing left to count). `clears`: a success
 * clears the failures (the email's window), else it only gives its reservation back (the address's).
 * A failure whose window ended meanwhile starts a new one, as a failure always did.
 */
export function settled (window: Window | null | undefined, outcome: Outcome, clears: boolean, nowMs: number): Window | null {
  if (!live(window, nowMs)) return outcome === 'failed' ? { startMs: nowMs, failures: 1, pending: 0 } : null
  const pending = Math.max(0, (window.pending ?? 0) - 1)
  const failures = outcome === 'failed' ? window.failures + 1 : outcome === 'succeeded' && clears ? 0 : window.failures
  return failures === 0 && pending === 0 ? null : { startMs: window.startMs, failures, pending }
}

export class SignInLimit implements SignInLimiter {
  private readonly windows = new Map<string, Window>()

  reserve (email: string, address: string, nowMs: number): number {
    const byEmail = this.windows.get('e:' + email)
    const byAddress = this.windows.get('a:' + address)
    const waitMs = Math.max(blockedMs(byEmail, SIGN_IN_LIMITS.perEmail, nowMs), blockedMs(byAddress, SIGN_IN_LIMITS.perAddress, nowMs))
    if (waitMs > 0) return waitMs
    this.put('e:' + email, reserved(byEmail, nowMs), nowMs)
    this.put('a:' + address, reserved(byAddress, nowMs), nowMs)
    return 0
  }

  settle (email: string, address: string, outcome: Outcome, nowMs: number): void {
    this.put('e:' + email, settled(this.windows.get('e:' + email), outcome, true, nowMs), nowMs)
    this.put('a:' + address, settled(this.windows.get('a:' + address), outcome, false, nowMs), nowMs)
  }

  private put (key: string, window: Window | null, nowMs: number): void {
    if (window === null) {
      this.windows.delete(key)
      return
    }
    if (!this.windows.has(key) && this.windows.size >= SIGN_IN_LIMITS.entriesMax) this.dropStale(nowMs)
    this.windows.set(key, window)
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
