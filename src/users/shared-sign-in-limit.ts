// Cluster mode's sign-in limit: the windows of sign-in-limit.ts kept in a store every node reads and
// writes (src/cluster/sign-in-kv.ts: a replicated KV bucket), so the failures made through any node
// count toward one limit per email and per client address, as on one node. Keys are the SHA-256 of
// the email or address (never the email itself). A failure is counted by compare-and-set on the key's
// revision, read again when another node counted first. The store failing (NATS without a quorum)
// answers 503 unavailable, never an attempt let through unchecked.

import { createHash } from 'node:crypto'
import { ApiError } from '../errors.js'
import { blockedMs, counted, SIGN_IN_LIMITS, type SignInLimiter, type Window } from './sign-in-limit.js'

/** Where the windows are kept. */
export interface WindowStore {
  /** The key's window (null: none, or deleted) and its revision (0: never written). */
  read (key: string): Promise<{ window: Window | null, revision: number }>
  /** Writes the window if the key is still at `revision`; false when another node wrote it first. */
  write (key: string, window: Window, revision: number): Promise<boolean>
  remove (key: string): Promise<void>
}

/** Tries to count one failure before giving up (each a read and a compare-and-set). */
export const COUNT_ATTEMPTS_MAX = 10

export class SharedSignInLimit implements SignInLimiter {
  constructor (private readonly store: WindowStore) {}

  async waitMs (email: string, address: string, nowMs: number): Promise<number> {
    const [byEmail, byAddress] = await unavailableOnFailure(Promise.all([this.store.read(keyOf('e', email)), this.store.read(keyOf('a', address))]))
    return Math.max(blockedMs(byEmail.window, SIGN_IN_LIMITS.perEmail, nowMs), blockedMs(byAddress.window, SIGN_IN_LIMITS.perAddress, nowMs))
  }

  async failed (email: string, address: string, nowMs: number): Promise<void> {
    await unavailableOnFailure(Promise.all([this.count(keyOf('e', email), nowMs), this.count(keyOf('a', address), nowMs)]))
  }

  async succeeded (email: string): Promise<void> {
    await unavailableOnFailure(this.store.remove(keyOf('e', email)))
  }

  private async count (key: string, nowMs: number): Promise<void> {
    for (let attempt = 1; attempt <= COUNT_ATTEMPTS_MAX; attempt++) {
      const known = await this.store.read(key)
      if (await this.store.write(key, counted(known.window, nowMs), known.revision)) return
    }
    throw new Error(`sign-in failure not counted: ${COUNT_ATTEMPTS_MAX} other nodes wrote the key first`)
  }
}

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
