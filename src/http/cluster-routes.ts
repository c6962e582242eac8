// Cluster mode only. GET /admin/cluster (admin key): the cluster as the answering node sees it: its
// nodes, the partitions each holds with their lease ages, the partitions this node serves, and the route
// map. GET /cluster/routes (public, no key, cacheable for a second): the route map alone
// (src/cluster/route-map.ts), what clients and balancers send each request to its key's owner by.

import type { ClusterStatus } from '../cluster/node.js'
import { RouteMap, type RouteMapAnswer, type RouteMapSource } from '../cluster/route-map.js'
import { json, type RouteDefinition } from './route.js'
import * as R from './reply-schemas.js'

/** Long enough for a cache in front (a CDN, nginx) to absorb a crowd of clients; short against a takeover. */
const ROUTES_CACHE = Object.freeze({ 'Cache-Control': 'public, max-age=1' }) as Record<string, string>

export function clusterRoutes (cluster: (RouteMapSource & { status (): ClusterStatus }) | null): RouteDefinition[] {
  if (cluster === null) return []
  const map = new RouteMap(cluster)
  return [{
    method: 'get', pattern: '/admin/cluster', body: false, role: 'admin',
    doc: {
      summary: 'The cluster: nodes, partitions, lease ages, route map', tag: 'Cluster',
      description: 'As the answering node sees the lease and member buckets; two nodes may differ for up to a lease time after a change. `routes` is what GET /cluster/routes answers. Served only in cluster mode (BEACON_CLUSTER).',
      ok: json(200, 'The cluster.', R.ClusterStatus), errors: [],
    },
    handler: () => ({ status: 200, body: { ...cluster.status(), routes: map.current() } satisfies ClusterStatus & { routes: RouteMapAnswer } }),
  }, {
    method: 'get', pattern: '/cluster/routes', body: false,
    doc: {
      summary: 'The partition → node route map (no key)', tag: 'Cluster',
      description: 'Which node owns each partition and the base URL clients reach each node at (BEACON_PUBLIC_URL), as the answering node sees the leases. ' +
        'A key\'s partition is partitionOf(account, id, partitions) (docs/cluster.md, "Routing requests to their owner"). `version` changes whenever an owner or a URL does; ' +
        'compare it for equality. Cacheable for a second. Served only in cluster mode (BEACON_CLUSTER).',
      ok: json(200, 'The route map.', R.RouteMap), errors: [],
    },
    handler: () => ({ status: 200, body: map.current(), headers: ROUTES_CACHE }),
  }]
}
