// Creations awaiting their durable write, by scope (an account and a kind, or '' for the accounts):
// counted with what exists, so concurrent creations cannot pass a limit between the check and the insert.

import { ApiError } from '../errors.js'

export class Reservations {
  private readonly creating = new Map<string, Set<string>>()

  /**
   * Create-or-replace under a limit, atomically: a new key is checked against what exists (`size`)
   * plus the creations still awaiting their write, and holds its slot until `write` settled (which
   * inserts it). `limitMessage` has %d for the limit. A key already being created counts once.
   */
  async reserve (scope: string, key: string, exists: boolean, size: number, max: number, limitMessage: string, write: () => Promise<void>): Promise<void> {
    if (exists) return write()
    let pending = this.creating.get(scope)
    if (pending === undefined) this.creating.set(scope, pending = new Set())
    if (pending.has(key)) return write()
    if (size + pending.size >= max) throw new ApiError('conflict', limitMessage.replace('%d', max.toLocaleString('en-US')))
    pending.add(key)
    try {
      await write()
    } finally {
      pending.delete(key)
      if (pending.size === 0) this.creating.delete(scope)
    }
  }
}
