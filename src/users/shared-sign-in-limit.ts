// Cluster mode's sign-in limit: the windows of sign-in-limit.ts kept in a store every node reads and
// writes (src/cluster/sign-in-kv.ts: a replicated KV bucket), so the failures made through any node
// count toward one limit per email and per client address, as on one node. Keys are the SHA-256 of
// the email or address (never the email itself). An attempt is reserved, and settled, by
// compare-and-set on the key's revision, read again when another node wrote first: the email's first,
// then the address's (the email's given back when the address is blocked). The store failing (NATS without a quorum)
// answers 503 unavailable, never an attempt let through unchecked.

import { createHash } from 'node:crypto'
import { ApiError } from '../errors.js'
import { blockedMs, reserved, settled, SIGN_IN_LIMITS, type Outcome, type SignInLimiter, type Window } from './sign-in-limit.js'

/** Where the windows are kept. */
export interface WindowStore {
  /** The key's window (null: none, or deleted) and its revision (0: never written). */
  read (key: string): Promise<{ window: Window | null, revision: number }>
  /** Writes the window if the key is still at `revision`; false when another node wrote it first. */
  write (key: string, window: Window, revision: number): Promise<boolean>
}

/** Tries to change one window before giving up (each a read and a compare-and-set). */
export const COUNT_ATTEMPTS_MAX = 10

export class SharedSignInLimit implements SignInLimiter {
  constructor (private readonly store: WindowStore) {}

  async reserve (email: string, address: string, nowMs: number): Promise<number> {
    return await unavailableOnFailure((async () => {
      const emailKey = keyOf('e', email)
      const byEmail = await this.change(emailKey, window => blockedMs(window, SIGN_IN_LIMITS.perEmail, nowMs) || reserved(window, nowMs))
      if (byEmail > 0) return byEmail
      const byAddress = await this.change(keyOf('a', address), window => blockedMs(window, SIGN_IN_LIMITS.perAddress, nowMs) || reserved(window, nowMs))
      if (byAddress > 0) await this.change(emailKey, window => settled(window, 'untried', true, nowMs) ?? EMPTY)
      return byAddress
    })())
  }

  async settle (email: string, address: string, outcome: Outcome, nowMs: number): Promise<void> {
    await unavailableOnFailure(Promise.all([
      this.change(keyOf('e', email), window => settled(window, outcome, true, nowMs) ?? EMPTY),
      this.change(keyOf('a', address), window => settled(window, outcome, false, nowMs) ?? EMPTY),
    ]))
  }

  /**
   * Writes `next(window)` by compare-and-set and answers 0; `next` answering a number (how long the
   * window blocks another attempt) writes nothing and answers it.
   */
  private async change (key: string, next: (window: Window | null) => Window | number): Promise<number> {
    for (let attempt = 1; attempt <= COUNT_ATTEMPTS_MAX; attempt++) {
      const known = await this.store.read(key)
      const window = next(known.window)
      if (typeof window === 'number') return window
      if (await this.store.write(key, window, known.revision)) return 0
    }
    throw new Error(`sign-in window not changed: ${COUNT_ATTEMPTS_MAX} other nodes wrote the key first`)
  }
}

// A window with nothing in it (the bucket's max age removes the entry).
const EMPTY: Window = { startMs: 0, failures: 0, pending: 0 }

function keyOf (kind: 'e' | 'a', text: string): string {
  return createHash('sha256').update(`${kind}:${text}`).digest('hex')
}

async function unavailableOnFailure<T> (work: Promise<T>): Promise<T> {
  try {
    return await work
  } catch (error) {
    const refusal = new ApiError('unavailable', 'The cluster cannot check sign-in attempts right now; retry shortly.', undefined, { 'Retry-After': '1' })
    refusal.cause = error
    throw refusal
  }
}
