// Cluster mode: the saved reports' columns (saved-index.ts) of every node hold the whole cluster's log,
// fed from the cluster's event stream (src/cluster/event-stream.ts, `follow`): read from its oldest
// message at start (the result and preview routes answer 503 reports_loading until it is read up to
// where it stood), then each event as the stream stores it, whichever node accepted it. So any node
// answers a saved report exactly, from its own memory, as an embedded server does; an event shows in
// reports moments after its 200 (the time the stream takes to hand it over). Erasures reach every node's
// columns through the cluster's erasure stream (src/delivery/cluster-erasures.ts), account deletions
// through the replicated configuration; what the stream's MaxAge and MaxBytes drop is dropped by the
// compaction pass (saved-results.ts), from the stream's oldest message time, read each minute here.

import type { EventStream, FollowedEvent } from '../cluster/event-stream.js'
import type { SavedReportIndex } from './saved-index.js'

export interface SavedStreamFeedOptions {
  index: SavedReportIndex
  events: Pick<EventStream, 'follow' | 'firstTimeMs'>
  /** How often the stream's oldest message time is read again. */
  everyMs: number
  onLoaded: (events: number, ms: number) => void
  onError: (error: unknown) => void
}

export interface SavedStreamFeed {
  /** When the stream's oldest message was stored, as last read (null: none read yet, or the stream is empty). */
  firstTimeMs: () => number | null
  stop: () => void
}

/** How long a feed that could not start (NATS away) waits before it tries again. */
const FEED_RETRY_MS = 2000

/** Starts the feed in the background; the index is not ready until the stream is read up to where it stood. */
export function feedSavedReports ({ index, events, everyMs, onLoaded, onError }: SavedStreamFeedOptions): SavedStreamFeed {
  index.beginFeed()
  const started = Date.now()
  let read = 0
  let first: number | null = null
  let stopped = false
  let stopFollowing: (() => void) | null = null
  let retry: NodeJS.Timeout | null = null
  const onEvent = (event: FollowedEvent): void => {
    read++
    index.addFed(event.account, event.timeMs, event.visitorId, event.profileId, event.kind, event.fields, event.segments)
  }
  const onCaughtUp = (): void => {
    index.fed()
    onLoaded(read, Date.now() - started)
  }
  // `follow` fails only before its first event (the stream's state or the consumer not had): again, later.
  const begin = (): void => {
    retry = null
    events.follow(onEvent, onCaughtUp).then(stop => {
      if (stopped) stop()
      else stopFollowing = stop
    }, (error: unknown) => {
      onError(error)
      if (!stopped) retry = setTimeout(begin, FEED_RETRY_MS).unref()
    })
  }
  begin()
  const refresh = (): void => { events.firstTimeMs().then(ms => { first = ms }, onError) }
  refresh()
  const timer = setInterval(refresh, everyMs).unref()
  return {
    firstTimeMs: () => first,
    stop: () => {
      stopped = true
      clearInterval(timer)
      if (retry !== null) clearTimeout(retry)
      stopFollowing?.()
    },
  }
}
