// What the server tells about each finished request (ServerOptions.observe), assembled per route once:
//   - metrics (when BEACON_METRICS is on);
//   - a sampled request log line (BEACON_REQUEST_LOG_SAMPLE > 0): route pattern, method, status and
//     duration only, never the URL, path parameters, headers or body (ids can be e-mail addresses,
//     bodies carry tokens);
//   - one log line per configuration change made through the admin API (accounts, tokens, event
//     types, campaigns, segments, webhooks) that succeeded, with the account and the record's id.
// A route none of them wants gets no observer: the server then skips even its clock reads.

import type { Logger } from 'pino'
import type { RouteInfo, RouteObserver } from '../http/server.js'
import type { Metrics } from './metrics.js'

export interface ObserveOptions {
  metrics: Metrics | null
  /** The share of requests logged, 0 to 1. */
  requestLogSample: number
  log: Logger
  /** Injected for tests; Math.random otherwise. */
  random?: () => number
}

/** Admin routes whose path holds a person's id: their changes are erasures, not configuration, and ids stay out of logs. */
const PERSONAL = /\/(profiles|visitors)\//

export function requestObservers ({ metrics, requestLogSample, log, random = Math.random }: ObserveOptions): (route: RouteInfo) => RouteObserver | null {
  return route => {
    const method = route.method === 'any' ? 'other' : route.method === 'del' ? 'DELETE' : route.method.toUpperCase()
    const observers: RouteObserver[] = []
    if (metrics !== null) observers.push(metrics.observeRoute(route))
    if (requestLogSample > 0) {
      const fields = { route: route.pattern, method }
      observers.push((status, durationMs) => {
        if (random() < requestLogSample) log.info({ ...fields, status, durationMs: Math.round(durationMs * 1000) / 1000 }, 'request')
      })
    }
    if (isConfigChange(route)) observers.push(configChangeLogger(route, method, log))
    return combine(observers)
  }
}

export function isConfigChange (route: RouteInfo): boolean {
  return route.pattern.startsWith('/admin/') && (route.method === 'post' || route.method === 'put' || route.method === 'patch' || route.method === 'del') &&
    !PERSONAL.test(route.pattern)
}

function configChangeLogger (route: RouteInfo, method: string, log: Logger): RouteObserver {
  const names = (route.pattern.match(/:[A-Za-z]+/g) ?? []).map(name => name.slice(1))
  return (status, _durationMs, params) => {
    if (status >= 300) return
    const ids: Record<string, string> = {}
    names.forEach((name, i) => { ids[name] = params[i] ?? '' })
    log.info({ method, route: route.pattern, status, ...ids }, 'configuration changed')
  }
}

function combine (observers: RouteObserver[]): RouteObserver | null {
  if (observers.length === 0) return null
  if (observers.length === 1) return observers[0]!
  return (status, durationMs, params) => {
    for (const observer of observers) observer(status, durationMs, params)
  }
}
