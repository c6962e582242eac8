// The devices ever linked to a profile, as the links index ([account, profileId, visitorId], uncapped: a
// profile's state keeps its latest 100 devices) holds them: what erasure and export follow
// (src/jobs/erasure.ts).
//
// Embedded mode: this node's index. Cluster mode: the index is each node's own LMDB (not in the
// changelog), so every live node is asked for its rows of the profile (a call to a named node,
// src/cluster/node-calls.ts) and the answer is their union. Every visitor's row is at the owner of the
// visitor's partition: the visitor actor writes it when it gets linked, and a partition's recovery writes
// it for each recovered visitor linked to a profile (actors/entity-log-format.ts `writeDerived`); the
// profile's owner writes it too when it links. Rows left on a node that lost a partition since are stale,
// not wrong: the device they name was linked to the profile once. A node that does not answer in time
// makes the whole lookup a 503 `unavailable` (Retry-After: 1): never a partial list, so never a partial
// erasure said complete. Each node answers in pages (one NATS message each) until it has no more.

import { sizedItems, type PeerCalls } from '../cluster/node-listing.js'
import type { Store } from './store.js'

export interface ProfileLinksOptions {
  store: Store
  /** Resolves once the links index holds the links of earlier releases too (src/store/links-backfill.ts). */
  ready: () => Promise<void>
  /** Cluster mode: calls to the other nodes. Absent: this node's index only. */
  calls?: PeerCalls | null
}

interface LinksCall { account: string, profileId: string, after: string | null }
interface LinksPage { ids: string[], more: boolean }

/** Ids read per page at a node (before the page is cut to its size bound). */
const PAGE_IDS = 5000

export class ProfileLinks {
  private readonly store: Store
  private readonly ready: () => Promise<void>
  private readonly calls: PeerCalls | null

  constructor ({ store, ready, calls = null }: ProfileLinksOptions) {
    this.store = store
    this.ready = ready
    this.calls = calls
    calls?.serve('links.of', async payload => {
      const { account, profileId, after } = payload as LinksCall
      await this.ready()
      const page = this.page(account, profileId, after, PAGE_IDS)
      const ids = sizedItems(page.ids, id => id.length + 8)
      return { ids: [...ids], more: page.more || ids.length < page.ids.length } satisfies LinksPage
    })
  }

  /** Every visitor id linked to the profile in this node's index (embedded mode) or in any live node's (cluster mode). */
  async of (account: string, profileId: string): Promise<string[]> {
    const calls = this.calls
    if (calls === null) {
      await this.ready()
      return this.page(account, profileId, null, Infinity).ids
    }
    const ids = new Set<string>()
    await Promise.all(calls.nodes().map(async node => {
      let after: string | null = null
      for (;;) {
        const page = await calls.call(node, 'links.of', { account, profileId, after } satisfies LinksCall) as LinksPage
        for (const id of page.ids) ids.add(id)
        if (!page.more || page.ids.length === 0) return
        after = page.ids[page.ids.length - 1]!
      }
    }))
    return [...ids]
  }

  /** This node's rows of the profile after the visitor id `after` (null: from the first), at most `limit`. */
  private page (account: string, profileId: string, after: string | null, limit: number): LinksPage {
    const ids: string[] = []
    let more = false
    // No end key: a profile id may hold any character, so the range ends where the prefix does.
    for (const key of this.store.links.getKeys({ start: after === null ? [account, profileId] : [account, profileId, after] }) as Iterable<string[]>) {
      if (key[0] !== account || key[1] !== profileId) break
      if (key[2] === after) continue
      if (ids.length === limit) {
        more = true
        break
      }
      ids.push(key[2]!)
    }
    return { ids, more }
  }
}
