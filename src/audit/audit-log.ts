// The audit log: one entry per state-changing admin call (who, when, what entity, which id, what
// changed in short), per account, newest first. Keys are [account, seq] with seq from the store's
// sequence, so a listing is one reverse range read and the cursor is the last seq seen. Bounded: an
// account keeps its latest AUDIT_KEEP entries; older ones are deleted as new ones come.

import { ApiError } from '../errors.js'
import type { Clock } from '../clock.js'
import type { Store } from '../store/store.js'

export const AUDIT_KEEP = 10_000
export const AUDIT_PAGE_MAX = 200
/** Deletions happen in batches: the oldest are trimmed once this many past the bound have gathered. */
const TRIM_SLACK = 100

export type AuditActor = { type: 'admin' } | { type: 'user', id: string, email: string }

export interface AuditEntry {
  id: string
  at: string
  actor: AuditActor
  action: string
  entity: string
  entityId: string
  summary: string
}

type StoredEntry = Omit<AuditEntry, 'id'>

export class AuditLog {
  private readonly store: Store
  private readonly clock: Clock
  /** Entries per account, counted on first use. */
  private readonly counts = new Map<string, number>()

  constructor (store: Store, clock: Clock) {
    this.store = store
    this.clock = clock
  }

  /** Append an entry and wait until it is durable. */
  async append (account: string, entry: Omit<StoredEntry, 'at'>): Promise<void> {
    const seq = this.store.allocateSeq()
    const stored: StoredEntry = { at: new Date(this.clock.nowMs()).toISOString(), ...entry }
    const write = this.store.audit.put([account, seq], stored)
    const count = this.countOf(account) + 1
    this.counts.set(account, count)
    if (count > AUDIT_KEEP + TRIM_SLACK) this.trim(account, count - AUDIT_KEEP)
    await this.store.durable(write)
  }

  /** Newest first; `cursor` is the `next` of the previous page. */
  list (account: string, limit: number, cursor: string | null): { entries: AuditEntry[], next: string | null } {
    let before = Number.MAX_SAFE_INTEGER
    if (cursor !== null) {
      before = Number(cursor)
      if (!/^\d{1,16}$/.test(cursor) || !Number.isSafeInteger(before)) throw new ApiError('invalid_field', 'cursor must be the next value of a previous page.', '/cursor')
    }
    const { entries, more } = this.page(account, before, limit)
    return { entries, next: more ? entries.at(-1)!.id : null }
  }

  /** At most `limit` entries older than seq `before`, newest first (each `id` its seq), and whether older ones remain. */
  page (account: string, before: number, limit: number): { entries: AuditEntry[], more: boolean } {
    const entries: AuditEntry[] = []
    for (const { key, value } of this.store.audit.getRange({ start: [account, before - 1], end: [account, 0], reverse: true, limit: limit + 1 })) {
      if (entries.length === limit) return { entries, more: true }
      entries.push({ id: String((key as [string, number])[1]), ...(value as StoredEntry) })
    }
    return { entries, more: false }
  }

  private countOf (account: string): number {
    let count = this.counts.get(account)
    if (count === undefined) {
      count = this.store.audit.getKeysCount({ start: [account, 0], end: [account, Number.MAX_SAFE_INTEGER] })
      this.counts.set(account, count)
    }
    return count
  }

  private trim (account: string, drop: number): void {
    for (const key of this.store.audit.getKeys({ start: [account, 0], end: [account, Number.MAX_SAFE_INTEGER], limit: drop })) {
      this.store.ignoreFailure(this.store.audit.remove(key))
    }
    this.counts.set(account, this.countOf(account) - drop)
  }
}
