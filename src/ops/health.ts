// Liveness and readiness. /healthz says the process answers; /readyz says it should get traffic: LMDB
// open, NATS connected when configured, in cluster mode joined with every partition owned, not draining. A load balancer takes a node out on the first
// 503 and puts it back on the next 200, so readiness is computed fresh on every call (a few field reads).

export interface HealthSources {
  /** Whether the LMDB environment is open (Store.isOpen). */
  lmdbOpen: () => boolean
  /** Whether the server is draining before it stops (HttpServer.draining). */
  draining: () => boolean
  /** The NATS connection, when the NATS mode is configured and running; null in the embedded mode. */
  nats: { connected: () => boolean } | null
  /** Cluster mode: why this node is not ready (not joined, a partition without owner), null when it is; absent in the embedded mode. */
  cluster?: { unready: () => string | null } | null
}

export const CHECKS = ['lmdb', 'nats', 'cluster', 'draining'] as const
export type CheckName = typeof CHECKS[number]

export interface Check {
  name: CheckName
  ok: boolean
  message: string
}

export interface Readiness {
  status: 200 | 503
  body: {
    status: 'ready' | 'not_ready'
    /** The first failing check's message (absent when ready). */
    reason?: string
    checks: Check[]
  }
}

export function readiness ({ lmdbOpen, draining, nats, cluster = null }: HealthSources): Readiness {
  const checks: Check[] = [
    lmdbOpen() ? { name: 'lmdb', ok: true, message: 'LMDB is open.' } : { name: 'lmdb', ok: false, message: 'LMDB is closed.' },
    nats === null
      ? { name: 'nats', ok: true, message: 'NATS is not configured (embedded mode).' }
      : nats.connected() ? { name: 'nats', ok: true, message: 'Connected to NATS.' } : { name: 'nats', ok: false, message: 'Not connected to NATS.' },
    // Only in cluster mode: the embedded mode's answer is as it was.
    ...(cluster === null ? [] : [clusterCheck(cluster.unready())]),
    draining() ? { name: 'draining', ok: false, message: 'The server is shutting down.' } : { name: 'draining', ok: true, message: 'Not draining.' },
  ]
  const failed = checks.find(check => !check.ok)
  return failed === undefined
    ? { status: 200, body: { status: 'ready', checks } }
    : { status: 503, body: { status: 'not_ready', reason: failed.message, checks } }
}

function clusterCheck (unready: string | null): Check {
  return unready === null ? { name: 'cluster', ok: true, message: 'Joined the cluster; every partition has an owner.' } : { name: 'cluster', ok: false, message: unready }
}

export const LIVENESS = { status: 'ok' } as const
