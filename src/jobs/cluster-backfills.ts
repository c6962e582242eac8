// Segment backfills in cluster mode (docs/event-log.md, "Backfilling a segment"): the nodes that apply
// events are every live node of the cluster. The backfill's row is replicated and written before its
// segment (src/catalog/segments.ts), so a node holds the segment (its new windows counting live events
// from the cut on, its changes quiet) from the moment it applies the change. The cut is set
// BACKFILL_CUT_AHEAD_MS after the swap, and the job, on the node that took the save, asks every live node
// whether it holds the backfill: only when all do before the cut does it go on. An event any node applies
// before the cut is then in the stream, read by the walk; one after it counts live; none is counted twice
// or missed. A node that did not say so in time (a configuration watch that lagged, a node that did not
// answer) cancels the backfill, which the user can start again. Nodes' clocks are taken to agree within
// the margin (NTP). A node started later holds it from its start (it loads the replicated rows before it
// takes partitions). The walk reads the cluster's event stream in its order (stream sequences), sends each
// visitor's counters to its partition's owner, and waits for every live node's re-evaluation pass.

import { askEveryNode, type PeerCalls } from '../cluster/node-listing.js'
import { newJobId, nodeOfJob } from '../cluster/node-jobs.js'
import type { EventStream } from '../cluster/event-stream.js'
import type { Clock } from '../clock.js'
import type { SegmentCatalog } from '../catalog/segments.js'
import { idParts, type BackfillNodes, type BackfillRow, type BackfillSource } from './segment-backfill.js'

/** How far ahead of the swap a cluster's backfill cut is: room for every node to apply the change and say so. */
export const BACKFILL_CUT_AHEAD_MS = 2000
/** How often the job asks again while a node does not hold the backfill yet, or its pass still runs. */
const ASK_AGAIN_MS = 100
/** How long a node waits for its pass before it answers that it still runs. */
const IDLE_WAIT_MS = 1000

interface Held { account: string, segment: string, id: string, version: number }
interface ByAccount { account: string }

/** The cluster's event stream in the order it stored the events: positions [0, stream sequence]. */
export function streamOrdered (stream: EventStream): BackfillSource {
  return {
    next: async (account, query, after, limit) => {
      const { events, last } = await stream.next(account, query, after, limit)
      return { events, last: last === null ? null : [0, last[1]] }
    },
    positionOf: id => [0, idParts(id)[1]],
  }
}

export interface ClusterBackfillNodesOptions {
  calls: PeerCalls
  nodeId: string
  segments: SegmentCatalog
  clock: Clock
  /** This node's re-evaluation pass of the account ended (src/jobs/segment-maintenance.ts). */
  entitiesIdle: (account: string) => Promise<void>
}

export class ClusterBackfillNodes implements BackfillNodes {
  readonly cutAheadMs = BACKFILL_CUT_AHEAD_MS
  private readonly calls: PeerCalls
  private readonly nodeId: string
  private readonly clock: Clock

  constructor ({ calls, nodeId, segments, clock, entitiesIdle }: ClusterBackfillNodesOptions) {
    this.calls = calls
    this.nodeId = nodeId
    this.clock = clock
    // Held: the backfill's hold applied here, and the change's segment row and version with it.
    calls.serve('backfills.held', async payload => {
      const { account, segment, id, version } = payload as Held
      return segments.holdOf(account, segment)?.id === id && segments.versionOf(account) >= version
    })
    calls.serve('backfills.idle', async payload => {
      let timer: NodeJS.Timeout | undefined
      const waited = new Promise<boolean>(resolve => { timer = setTimeout(resolve, IDLE_WAIT_MS, false) })
      try {
        return await Promise.race([entitiesIdle((payload as ByAccount).account).then(() => true), waited])
      } finally {
        clearTimeout(timer)
      }
    })
  }

  newId (): string {
    return newJobId(this.nodeId)
  }

  runsHere (row: BackfillRow): boolean {
    return nodeOfJob(row.id) === this.nodeId
  }

  async held (row: BackfillRow): Promise<string | null> {
    const payload: Held = { account: row.account, segment: row.segment, id: row.id, version: row.version }
    let why = 'no node answered in time'
    for (;;) {
      try {
        const answers = await askEveryNode<boolean>(this.calls, 'backfills.held', () => payload)
        const missing = answers.filter(({ answer }) => !answer).map(({ node }) => node)
        // Each answer was given before now.
        if (missing.length === 0 && this.clock.nowMs() < row.fromMs) return null
        why = missing.length === 0 ? 'the last answer came after it' : `not held by ${missing.join(', ')}`
      } catch {
        why = 'a node did not answer'
      }
      if (this.clock.nowMs() >= row.fromMs) return `Not every node of the cluster held the backfill before its cut (${why}); save the segment with backfill again.`
      await new Promise(resolve => setTimeout(resolve, ASK_AGAIN_MS))
    }
  }

  /** Every live node's pass; rejects when a node does not answer (the walk tries again). */
  async idle (account: string): Promise<void> {
    for (;;) {
      const answers = await askEveryNode<boolean>(this.calls, 'backfills.idle', () => ({ account } satisfies ByAccount))
      if (answers.every(({ answer }) => answer)) return
      await new Promise(resolve => setTimeout(resolve, ASK_AGAIN_MS))
    }
  }
}
