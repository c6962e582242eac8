// The saved reports' columns loaded from the retained log in the background at start (docs/reports.md,
// "How it is computed"): turns of SAVED_LOAD_TURN rows, the event loop served between them, so the
// server answers (events, /healthz, every other route) while a large log loads. Until the last turn the
// result and preview routes answer 503 reports_loading.

import type { Database } from 'lmdb'
import type { SavedReportIndex } from './saved-index.js'

/** Rows read per turn (a few ms of work each): what an event waits at most behind the load. */
export const SAVED_LOAD_TURN = 2_000

export interface SavedLoadOptions {
  index: SavedReportIndex
  events: Database
  /** The seq of the last row logged before the load (later rows reach the index as appends). */
  upToSeq: number
  onLoaded: (rows: number, ms: number) => void
  onError: (error: unknown) => void
}

/** Starts the load (its first turn now); answers a stop (the load ends at its next turn, not ready). */
export function loadSavedReports ({ index, events, upToSeq, onLoaded, onError }: SavedLoadOptions): () => void {
  const loading = index.beginLoad(upToSeq)
  const started = Date.now()
  let stopped = false
  const turn = (): void => {
    if (stopped) return
    try {
      if (index.loadTurn(events, SAVED_LOAD_TURN)) onLoaded(loading.read, Date.now() - started)
      else setImmediate(turn)
    } catch (error) {
      onError(error)
    }
  }
  // The first turn at once: a log that fits in it (a new or small one) is ready before anything is served.
  turn()
  return () => { stopped = true }
}
