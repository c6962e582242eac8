// Which nats-server versions make JetStream's per-subject compare-and-set exact.
//
// Fencing (changelog appends) and lease renewal publish with Nats-Expected-Last-Subject-Sequence. Up to
// nats-server 2.9.20, on a replicated stream (R > 1) that check is only made by the leader before it
// proposes the message, against what it has stored so far, and not again when the message is applied
// (server/stream.go skipped it for clustered streams when the expected sequence is > 0): two publishes
// in flight at once that expect the same sequence can both be stored (nats-server issue #4320, fixed in
// 2.9.21 by checking again at apply time). An R1 stream, and an expected sequence of 0 (create), were
// always checked at apply time. Debian bookworm ships 2.9.10.

import type { NatsConnection } from '@nats-io/transport-node'
import { log } from '../log.js'

const EXACT_FROM = [2, 9, 21] as const

/** Is a per-subject compare-and-set exact on a stream with `replicas` replicas served by `version`? */
export function compareAndSetIsExact (version: string, replicas: number): boolean {
  if (replicas === 1) return true
  const parts = /^v?(\d+)\.(\d+)\.(\d+)/.exec(version)
  if (parts === null) return false
  const [major, minor, patch] = [Number(parts[1]), Number(parts[2]), Number(parts[3])]
  if (major !== EXACT_FROM[0]) return major > EXACT_FROM[0]
  if (minor !== EXACT_FROM[1]) return minor > EXACT_FROM[1]
  return patch >= EXACT_FROM[2]
}

const warned = new Set<string>()

/** Logs one warning per server version when fencing on `replicas` replicas is not exact there. */
export function warnIfCompareAndSetInexact (nc: NatsConnection, replicas: number, what: string): void {
  const version = nc.info?.version ?? 'unknown'
  if (compareAndSetIsExact(version, replicas) || warned.has(`${version}/${what}`)) return
  warned.add(`${version}/${what}`)
  log.warn({ natsServer: version, replicas, what }, `nats-server ${version} checks the expected last subject sequence of a replicated stream only before proposing: two concurrent compare-and-sets can both pass (fixed in 2.9.21); ${what} is not exactly fenced, use nats-server 2.9.21 or newer or 1 replica`)
}
