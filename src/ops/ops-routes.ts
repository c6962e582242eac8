// The operations endpoints: GET /healthz, /readyz, /metrics and /openapi.json. No key: load balancers,
// Prometheus and API tools call them. None of them reads a request body or touches an actor.

import { ApiError } from '../errors.js'
import { createHash, timingSafeEqual } from 'node:crypto'
import type { Reply, Request } from '../http/server.js'
import { json, type RouteDefinition, type RouteDoc } from '../http/route.js'
import * as R from '../http/reply-schemas.js'
import { LIVENESS, readiness, type HealthSources } from './health.js'
import { CONTENT_TYPE as METRICS_CONTENT_TYPE, type Metrics } from './metrics.js'
import { buildOpenApi } from './openapi.js'

export interface OpsDeps extends HealthSources {
  /** Null when BEACON_METRICS=false: /metrics then answers 404 saying so. */
  metrics: Metrics | null
  /** BEACON_METRICS_TOKEN: when set, /metrics answers only `Authorization: Bearer <token>` (else 401). */
  metricsToken?: string | null
}

const JSON_TYPE = 'application/json'

const get = (pattern: string, doc: RouteDoc, handler: (request: Request) => Reply | Promise<Reply>): RouteDefinition =>
  ({ method: 'get', pattern, body: false, whileDraining: true, uncounted: true, doc, handler })

export function opsRoutes ({ metrics, metricsToken = null, lmdbOpen, draining, nats, cluster = null }: OpsDeps): RouteDefinition[] {
  const allowed = metricsToken === null ? null : bearerCheck(metricsToken)
  return [
    get('/healthz', {
      summary: 'Liveness: the process answers', tag: 'Operations',
      ok: json(200, 'Up.', R.Liveness), errors: [],
    }, () => ({ status: 200, body: LIVENESS })),
    get('/readyz', {
      summary: 'Readiness: LMDB open, NATS connected when configured, not draining', tag: 'Operations',
      description: 'Send traffic while it answers 200. While draining the server answers 503 shutting_down before this check runs. In cluster mode also: this node joined and every partition has an owner (check `cluster`).',
      ok: json(200, 'Ready.', R.Readiness),
      also: [json(503, 'Not ready: `reason` says why.', R.Readiness)],
      errors: [],
    }, () => readiness({ lmdbOpen, draining, nats, cluster })),
    get('/metrics', {
      summary: 'Prometheus metrics', tag: 'Operations',
      description: 'Requests by route and status (per account counts included), latency histograms, actors, LMDB, outbox, process. Off with BEACON_METRICS=false. ' +
        'Open to anyone who can reach the port unless BEACON_METRICS_TOKEN is set: then only with `Authorization: Bearer <token>` (else 401).',
      ok: { status: 200, description: 'Prometheus text format.', schema: R.MetricsText, contentType: METRICS_CONTENT_TYPE },
      errors: ['not_found', 'metrics_unauthorized'],
    }, async request => {
      if (allowed !== null && !allowed(request.authorization)) {
        throw new ApiError('metrics_unauthorized', undefined, undefined, { 'WWW-Authenticate': 'Bearer realm="metrics"' })
      }
      if (metrics === null) throw new ApiError('not_found', 'Metrics are off (BEACON_METRICS=false).')
      return { status: 200, body: await metrics.text(), contentType: METRICS_CONTENT_TYPE }
    }),
  ]
}

/** Whether an Authorization header is `Bearer <token>`, compared in constant time (as digests). */
function bearerCheck (token: string): (authorization: string) => boolean {
  const want = createHash('sha256').update(token).digest()
  return authorization => {
    if (!authorization.startsWith('Bearer ')) return false
    return timingSafeEqual(createHash('sha256').update(authorization.slice(7)).digest(), want)
  }
}

/**
 * The routes, and after them GET /openapi.json describing all of them (itself included): the document
 * is built from the same definitions the router serves, once, and served as text.
 */
export function withOpenApi (routes: readonly RouteDefinition[]): RouteDefinition[] {
  let text = ''
  const route: RouteDefinition = get('/openapi.json', {
    summary: 'This document', tag: 'Operations',
    ok: json(200, 'OpenAPI 3.1.', R.OpenApiDocument), errors: [],
  }, () => ({ status: 200, body: text, contentType: JSON_TYPE }))
  const all = [...routes, route]
  text = JSON.stringify(buildOpenApi(all))
  return all
}
