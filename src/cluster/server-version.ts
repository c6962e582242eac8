// The oldest nats-server cluster mode runs on: 2.10.0. The NATS maintainers support the latest two minor
// releases (2.11 and 2.12 today; Debian 13 ships 2.10.27, the release the tests run); 2.9 is out of
// support and has bugs cluster mode would have to work around: a replicated stream's per-subject
// compare-and-set checked only before proposing (nats-server issue #4320, fixed in 2.9.21), which lets a
// stale owner's append land after a takeover's claim, and a restarted server replaying a subject purge
// as a purge of the whole stream (#4196, fixed in 2.9.18), which loses acknowledged writes at compaction.
// A node refuses to start on an older server (or one without JetStream) instead of running unsafely.

import type { NatsConnection } from '@nats-io/transport-node'

export const NATS_SERVER_MINIMUM = [2, 10, 0] as const
export const NATS_SERVER_MINIMUM_TEXT = NATS_SERVER_MINIMUM.join('.')

/** Is `version` (as the server's INFO reports it, e.g. "2.10.27" or "v2.12.1-beta.2") one cluster mode runs on? */
export function isSupportedServer (version: string): boolean {
  const parts = /^v?(\d+)\.(\d+)\.(\d+)/.exec(version)
  if (parts === null) return false
  const [major, minor, patch] = [Number(parts[1]), Number(parts[2]), Number(parts[3])]
  if (major !== NATS_SERVER_MINIMUM[0]) return major > NATS_SERVER_MINIMUM[0]
  if (minor !== NATS_SERVER_MINIMUM[1]) return minor > NATS_SERVER_MINIMUM[1]
  return patch >= NATS_SERVER_MINIMUM[2]
}

/**
 * Why cluster mode cannot run on the server `nc` is connected to (one line naming the minimum), or null
 * when it can: JetStream enabled and nats-server NATS_SERVER_MINIMUM or newer.
 */
export function unsupportedServer (nc: NatsConnection): string | null {
  const info = nc.info
  const version = info?.version ?? 'unknown'
  const name = info?.server_name ?? info?.server_id ?? 'the NATS server'
  if (!isSupportedServer(version)) {
    return `nats-server ${version} (${name}) is too old: cluster mode needs nats-server ${NATS_SERVER_MINIMUM_TEXT} or newer with JetStream (BEACON_NATS_URL)`
  }
  if (info?.jetstream !== true) {
    return `nats-server ${version} (${name}) has JetStream disabled: cluster mode needs nats-server ${NATS_SERVER_MINIMUM_TEXT} or newer with JetStream (BEACON_NATS_URL)`
  }
  return null
}
