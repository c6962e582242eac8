// Cursor paging of the admin listings: items in key order, a page after the cursor, and `next` (the
// last key of the page) while more follow. Keys are ids or names, so a cursor is stable across
// writes: an item created or deleted between pages shifts nothing else, and every item present for
// the whole walk is listed exactly once.

import { assert } from '../assert.js'

export interface Page<T> {
  items: T[]
  /** Pass as `cursor` for the next page; null on the last one. */
  next: string | null
}

/** The page of `entries` ([key, value]) whose keys sort after `cursor` ('' = from the start), each turned into an item by `view`. */
export function pageOf<V, T> (entries: Iterable<readonly [string, V]>, cursor: string, limit: number, view: (key: string, value: V) => T): Page<T> {
  // The route's schema bounds `limit` (src/store/limits.ts): a page of none would never end a walk.
  assert(Number.isInteger(limit) && limit > 0, 'a page holds at least one item', { limit })
  const after: Array<readonly [string, V]> = []
  for (const entry of entries) if (entry[0] > cursor) after.push(entry)
  after.sort((a, b) => a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)
  const page = after.length > limit ? after.slice(0, limit) : after
  return { items: page.map(entry => view(entry[0], entry[1])), next: after.length > limit ? page[page.length - 1]![0] : null }
}
