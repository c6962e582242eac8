// Which nats-server versions make JetStream's per-subject compare-and-set exact.
//
// Fencing (changelog appends) and lease renewal publish with Nats-Expected-Last-Subject-Sequence. Up to
// nats-server 2.9.20, on a replicated stream (R > 1) that check is only made by the leader before it
// proposes the message, against what it has stored so far, and not again when the message is applied
// (server/stream.go skipped it for clustered streams when the expected sequence is > 0): two publishes
// in flight at once that expect the same sequence can both be stored (nats-server issue #4320, fixed in
// 2.9.21 by checking again at apply time). An R1 stream, and an expected sequence of 0 (create), were
// always checked at apply time. Debian bookworm ships 2.9.10.
//
// Compaction (Changelog.purge) removes a partition's messages before a snapshot. Up to nats-server 2.9.17,
// a server of a JetStream cluster that restarts and replays its log applies a purge of one subject up
// to a sequence (an "extended" purge) as a purge of the whole stream (nats-server issue #4196, fixed in
// 2.9.18): once it leads the stream, every partition's acknowledged messages before that point are gone
// (seen here as acknowledged writes lost after a NATS server's restart, reproduced in changelog.test.ts).
// Deleting the messages one by one replays exactly: that is what the changelog does on such servers.

import type { NatsConnection } from '@nats-io/transport-node'
import { log } from '../log.js'

const EXACT_FROM = [2, 9, 21] as const
const PURGE_REPLAYED_EXACTLY_FROM = [2, 9, 18] as const

/** Is a per-subject compare-and-set exact on a stream with `replicas` replicas served by `version`? */
export function compareAndSetIsExact (version: string, replicas: number): boolean {
  return replicas === 1 || atLeast(version, EXACT_FROM)
}

/** May the changelog purge a subject up to a sequence on this server (not clustered, or 2.9.18+)? */
export function subjectPurgeIsSafe (version: string, clustered: boolean): boolean {
  return !clustered || atLeast(version, PURGE_REPLAYED_EXACTLY_FROM)
}

function atLeast (version: string, least: readonly [number, number, number]): boolean {
  const parts = /^v?(\d+)\.(\d+)\.(\d+)/.exec(version)
  if (parts === null) return false
  const [major, minor, patch] = [Number(parts[1]), Number(parts[2]), Number(parts[3])]
  if (major !== least[0]) return major > least[0]
  if (minor !== least[1]) return minor > least[1]
  return patch >= least[2]
}

const warned = new Set<string>()

/** Logs one warning per server version when fencing on `replicas` replicas is not exact there. */
export function warnIfCompareAndSetInexact (nc: NatsConnection, replicas: number, what: string): void {
  const version = nc.info?.version ?? 'unknown'
  if (compareAndSetIsExact(version, replicas) || warned.has(`${version}/${what}`)) return
  warned.add(`${version}/${what}`)
  log.warn({ natsServer: version, replicas, what }, `nats-server ${version} checks the expected last subject sequence of a replicated stream only before proposing: two concurrent compare-and-sets can both pass (fixed in 2.9.21); ${what} is not exactly fenced, use nats-server 2.9.21 or newer or 1 replica`)
}
