// The operations endpoints: GET /healthz, /readyz, /metrics and /openapi.json. No key: load balancers,
// Prometheus and API tools call them. None of them reads a request body or touches an actor.

import { ApiError } from '../errors.js'
import type { Reply, Route } from '../http/server.js'
import { LIVENESS, readiness, type HealthSources } from './health.js'
import { CONTENT_TYPE as METRICS_CONTENT_TYPE, type Metrics } from './metrics.js'
import { buildOpenApi } from './openapi.js'

export interface OpsDeps extends HealthSources {
  /** Null when BEACON_METRICS=false: /metrics then answers 404 saying so. */
  metrics: Metrics | null
}

const JSON_TYPE = 'application/json'

export function opsRoutes ({ metrics, lmdbOpen, draining, nats }: OpsDeps): Route[] {
  // Built and serialized once: the document only changes with the code.
  const openapi = JSON.stringify(buildOpenApi())
  const get = (pattern: string, handler: () => Reply | Promise<Reply>): Route => ({ method: 'get', pattern, body: false, whileDraining: true, uncounted: true, handler })

  return [
    get('/healthz', () => ({ status: 200, body: LIVENESS })),
    get('/readyz', () => readiness({ lmdbOpen, draining, nats })),
    get('/metrics', async () => {
      if (metrics === null) throw new ApiError('not_found', 'Metrics are off (BEACON_METRICS=false).')
      return { status: 200, body: await metrics.text(), contentType: METRICS_CONTENT_TYPE }
    }),
    get('/openapi.json', () => ({ status: 200, body: openapi, contentType: JSON_TYPE })),
  ]
}
