// The links index (every visitor ever linked to a profile) is written by the profile actor as links
// are made. Links made by a release before it are in the visitors' rows only: this fills the index
// from them once, in the background after the first start of this release, a bounded batch a
// transaction with the event loop free between batches, its cursor saved with each so a restart
// goes on where it stood.

import type { Key, Store } from './store.js'
import { log } from '../log.js'

export const BACKFILL_BATCH_MAX = 1000
const CURSOR_KEY = 'links-backfill'

interface Cursor {
  done: boolean
  after: Key | null
}

export class LinksBackfill {
  private readonly store: Store
  private running: Promise<void> | null = null
  private stopped = false

  constructor (store: Store) {
    this.store = store
  }

  start (): void {
    const cursor = this.store.meta.get(CURSOR_KEY) as Cursor | undefined
    if (cursor?.done === true) return
    this.running = this.fill(cursor?.after ?? null).catch((error: unknown) => {
      log.error({ err: error }, 'the links index backfill stopped; it goes on at the next start')
    })
  }

  /** Resolves when the backfill finished or paused (stop; tests). */
  async settled (): Promise<void> {
    await this.running
  }

  async stop (): Promise<void> {
    this.stopped = true
    await this.running
  }

  private async fill (from: Key | null): Promise<void> {
    const { store } = this
    let after = from
    while (!this.stopped) {
      let read = 0
      let last: Key | null = null
      for (const { key, value } of store.visitors.getRange(after === null ? {} : { start: after }) as Iterable<{ key: Key, value: { profileId?: string | null } }>) {
        if (after !== null && read === 0 && JSON.stringify(key) === JSON.stringify(after)) continue
        last = key
        const profileId = value.profileId
        if (typeof profileId === 'string') {
          // Visitor ids are keyed in lower case (a row of an earlier release in upper case moves on its next load).
          const [account, visitorId] = key as [string, string]
          store.ignoreFailure(store.links.put([account, profileId, visitorId.toLowerCase()], null))
        }
        if (++read === BACKFILL_BATCH_MAX) break
      }
      const done = read < BACKFILL_BATCH_MAX
      after = last ?? after
      await store.save(store.meta, CURSOR_KEY, { done, after } satisfies Cursor)
      if (done) return
      await new Promise(resolve => setImmediate(resolve))
    }
  }
}
