// A cluster's partitions spread over S changelog streams (BEACON_CHANGELOG_STREAMS, fixed when the cluster
// is created: cluster-meta.ts), so that every write does not go through one stream's raft leader:
// partition p is in stream p mod S. Stream 0 is the one-stream cluster's own (`BEACON_CHANGELOG_<cluster>`,
// subjects `beacon.changelog.<cluster>.<p>`), so a cluster created before the setting is unchanged; stream
// i ≥ 1 is `BEACON_CHANGELOG_<cluster>_<i>`, subjects `beacon.changelog.<cluster>.s<i>.<p>` (stream 0's
// filter `….*` matches one token only). Fencing, snapshots and recovery stay per partition, in its stream.
//
// Leaders: JetStream places each stream's leader where it likes; at start a node steps crowded leaders
// down (`STREAM.LEADER.STEPDOWN`) until the streams' leaders are on as many servers as there are (or
// streams), bounded in time, so that the appends' raft work is spread (docs/cluster.md, "Sizing").

import type { NatsConnection } from '@nats-io/transport-node'
import { JetStreamApiCodes, JetStreamApiError, jetstreamManager } from '@nats-io/jetstream'
import { Changelog, changelogStreamName, type ChangelogOptions, type PartitionChangelog } from './changelog.js'

export interface ChangelogsOptions extends Omit<ChangelogOptions, 'stream' | 'subjectPrefix'> {
  cluster: string
  /** Streams (1: the one-stream layout). */
  count: number
}

/** Stream i's name and subject prefix. */
export function changelogStream (cluster: string, i: number): { stream: string, subjectPrefix: string } {
  const stream = changelogStreamName(cluster)
  const subjectPrefix = `beacon.changelog.${cluster}`
  return i === 0 ? { stream, subjectPrefix } : { stream: `${stream}_${i}`, subjectPrefix: `${subjectPrefix}.s${i}` }
}

export class Changelogs implements PartitionChangelog {
  readonly owner: string
  readonly streams: readonly Changelog[]

  private constructor (streams: Changelog[]) {
    this.streams = streams
    this.owner = streams[0]!.owner
  }

  /** Opens (creates if absent) the cluster's `count` streams. */
  static async open (options: ChangelogsOptions): Promise<Changelogs> {
    const { cluster, count, ...common } = options
    const streams: Changelog[] = []
    for (let i = 0; i < count; i++) streams.push(await Changelog.open({ ...common, ...changelogStream(cluster, i) }))
    return new Changelogs(streams)
  }

  /** The stream holding the partition. */
  of (partition: number): Changelog {
    return this.streams[partition % this.streams.length]!
  }

  claim (partition: number): Promise<number> { return this.of(partition).claim(partition) }
  holds (partition: number): boolean { return this.of(partition).holds(partition) }
  drop (partition: number): void { this.of(partition).drop(partition) }
  append (partition: number, entries: readonly unknown[]): Promise<number> { return this.of(partition).append(partition, entries) }
  acknowledgedSeq (partition: number): number | null { return this.of(partition).acknowledgedSeq(partition) }
  purge (partition: number, beforeSeq: number): Promise<number> { return this.of(partition).purge(partition, beforeSeq) }
  read (partition: number, afterSeq?: number, throughSeq?: number | null): ReturnType<Changelog['read']> { return this.of(partition).read(partition, afterSeq, throughSeq) }
  lastSeq (partition: number): Promise<number> { return this.of(partition).lastSeq(partition) }
  messageCount (partition: number): Promise<number> { return this.of(partition).messageCount(partition) }
}

/** Whether the cluster's first changelog stream exists (a cluster created before BEACON_CHANGELOG_STREAMS has it, and no record). */
export async function changelogExists (nc: NatsConnection, cluster: string): Promise<boolean> {
  const jsm = await jetstreamManager(nc, { timeout: 5000 })
  return await jsm.streams.info(changelogStreamName(cluster)).then(() => true, (error: unknown) => {
    if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound) return false
    throw error
  })
}

/**
 * Steps leaders down until no two of the streams share a leader while a server leads none (as far as
 * servers and streams allow), for at most `timeoutMs`. The leaders in the streams' order at the end.
 */
export async function spreadLeaders (nc: NatsConnection, streams: readonly string[], servers: number, timeoutMs = 60_000): Promise<string[]> {
  const jsm = await jetstreamManager(nc, { timeout: 5000 })
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const leaders: string[] = []
    for (const stream of streams) leaders.push((await jsm.streams.info(stream).catch(() => null))?.cluster?.leader ?? '')
    const seen = new Map<string, number>()
    let crowded: string | null = null
    for (const [i, leader] of leaders.entries()) {
      const count = (seen.get(leader) ?? 0) + 1
      seen.set(leader, count)
      if (leader === '' || (count > 1 && seen.size < Math.min(servers, streams.length))) crowded ??= streams[i]!
    }
    if (crowded === null || Date.now() > deadline) return leaders
    await nc.request(`$JS.API.STREAM.LEADER.STEPDOWN.${crowded}`, new Uint8Array(0), { timeout: 5000 }).catch(() => {})
    await new Promise(resolve => setTimeout(resolve, 1000))
  }
}
