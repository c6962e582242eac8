// GET /admin/cluster (cluster mode only, admin key): the cluster as the answering node sees it: its
// nodes, the partitions each holds with their lease ages, the partitions this node serves.

import type { ClusterStatus } from '../cluster/node.js'
import { json, type RouteDefinition } from './route.js'
import * as R from './reply-schemas.js'

export function clusterRoutes (cluster: { status (): ClusterStatus } | null): RouteDefinition[] {
  if (cluster === null) return []
  return [{
    method: 'get', pattern: '/admin/cluster', body: false, role: 'admin',
    doc: {
      summary: 'The cluster: nodes, partitions, lease ages', tag: 'Cluster',
      description: 'As the answering node sees the lease and member buckets; two nodes may differ for up to a lease time after a change. Served only in cluster mode (BEACON_CLUSTER).',
      ok: json(200, 'The cluster.', R.ClusterStatus), errors: [],
    },
    handler: () => ({ status: 200, body: cluster.status() }),
  }]
}
