// Reports and segment member counts of a whole cluster (cluster mode): each node counts what it
// handles (the events of the partitions it owns, the segment changes of their visitors and profiles,
// the deliveries it attempts) into its own memory and LMDB (src/reports/counters.ts), so the node that
// takes a report asks every live node for its share over NATS (src/cluster/node-calls.ts, through
// src/cluster/node-listing.ts's fan-out), all in parallel, and merges them: counts add, unique-visitor
// sketches merge register-wise (HyperLogLog: the merged sketch is the one a single node would have
// built from all the visitors), latency histograms add, member counts add (each node's share is signed:
// the enters minus the exits it counted; the sum is floored at zero).
//
// A node's share is its folded buckets for the range plus what it counted since the last fold, read
// after any fold under way committed (`ReportCounters.settled`), so every count is in exactly one of
// the two. An answer is one NATS message: its buckets in order until about CLUSTER_PAGE_SIZE_MAX_BYTES
// (256 KiB, at least one bucket), then `next`, the start of the first bucket left out, which the asking
// node asks for next (a 30-day report of a busy account, about 2.5 KiB a bucket, is one answer). A node
// that does not answer makes the report a 503 (NodeCalls: `unavailable`, Retry-After: 1), never a
// partial report.

import { askEveryNode, sizedItems, type PeerCalls } from '../cluster/node-listing.js'
import type { Store } from '../store/store.js'
import { EMPTY_BUCKET, mergeBuckets, type ReportCounters, type StoredBucket } from './counters.js'
import { localBuckets, reportRows } from './report.js'
import type { Granularity, ReportRow } from './report-shape.js'

export interface ClusterReportsOptions {
  counters: Pick<ReportCounters, 'settled' | 'pending' | 'memberShare'>
  store: Store
  calls: PeerCalls
}

interface BucketsCall { account: string, granularity: Granularity, fromMs: number, toMs: number }
/** A node's buckets in order of start; `next`: the start of the first one left for the next call, or null. */
interface BucketsAnswer { buckets: Array<[startMs: number, bucket: StoredBucket]>, next: number | null }
interface MembersCall { account: string, segments: string[] }

export class ClusterReports {
  private readonly calls: PeerCalls

  constructor ({ counters, store, calls }: ClusterReportsOptions) {
    this.calls = calls
    calls.serve('reports.buckets', async payload => {
      const { account, granularity, fromMs, toMs } = payload as BucketsCall
      const buckets = await localBuckets(counters, store, account, fromMs, toMs, granularity)
      const all = [...buckets].sort(([a], [b]) => a - b)
      const sent = sizedItems(all, ([, bucket]) => bucketBytes(bucket))
      return { buckets: [...sent], next: sent.length === all.length ? null : all[sent.length]![0] } satisfies BucketsAnswer
    })
    calls.serve('reports.members', async payload => {
      const { account, segments } = payload as MembersCall
      await counters.settled()
      return segments.map(segment => counters.memberShare(account, segment))
    })
  }

  /** The report's rows with every live node's counts. */
  async rows (account: string, fromMs: number, toMs: number, granularity: Granularity): Promise<ReportRow[]> {
    return reportRows(await this.buckets(account, fromMs, toMs, granularity), fromMs, toMs, granularity)
  }

  /** Every live node's buckets of the account, merged, by start (experiment results read them). */
  async buckets (account: string, fromMs: number, toMs: number, granularity: Granularity): Promise<Map<number, StoredBucket>> {
    const merged = new Map<number, StoredBucket>()
    const add = (answer: BucketsAnswer): void => {
      for (const [startMs, bucket] of answer.buckets) merged.set(startMs, mergeBuckets(merged.get(startMs) ?? EMPTY_BUCKET, bucket))
    }
    const call = (node: string, from: number): BucketsCall => ({ account, granularity, fromMs: from, toMs })
    const firsts = await askEveryNode<BucketsAnswer>(this.calls, 'reports.buckets', node => call(node, fromMs))
    await Promise.all(firsts.map(async ({ node, answer }) => {
      for (;;) {
        add(answer)
        if (answer.next === null) return
        answer = await this.calls.call(node, 'reports.buckets', call(node, answer.next)) as BucketsAnswer
      }
    }))
    return merged
  }

  /** Each segment's member count: the sum of every live node's share, floored at zero. */
  async members (account: string, segments: readonly string[]): Promise<number[]> {
    if (segments.length === 0) return []
    const shares = await askEveryNode<number[]>(this.calls, 'reports.members', () => ({ account, segments: [...segments] } satisfies MembersCall))
    return segments.map((_, i) => Math.max(0, shares.reduce((sum, { answer }) => sum + answer[i]!, 0)))
  }
}

/** About what a bucket takes as msgpack (an upper bound: a string's UTF-16 length × 3, 9 bytes a number). */
function bucketBytes (bucket: StoredBucket): number {
  let bytes = 64 + (bucket.visitors === null ? 0 : bucket.visitors.length + 8) + (bucket.latency === null ? 0 : bucket.latency.length * 9)
  for (const [kind] of bucket.events) bytes += kind.length * 3 + 12
  for (const [id] of bucket.campaigns) bytes += id.length * 3 + 32
  for (const [name] of bucket.segments) bytes += name.length * 3 + 22
  for (const [key, ...sums] of bucket.experiments ?? []) bytes += key.length * 3 + sums.length * 9 + 8
  return bytes
}
