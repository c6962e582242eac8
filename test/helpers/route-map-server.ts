// GET /cluster/routes in front of a real Beacon cluster, for the client's tests and bench/cluster.ts
// while the nodes do not serve it themselves (they do not know their own URLs yet): a node:http
// server that asks a live node's GET /admin/cluster for the lease holders and answers the route map's
// documented shape, the nodes' URLs from the caller. The version goes up whenever the owners change.

import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { RouteMapAnswer } from '../../src/client/types.js'
import type { ClusterStatus } from '../../src/cluster/node.js'

export interface RouteMapServer {
  /** The map's URL (…/cluster/routes). */
  url: string
  /** Answers served so far. */
  served: () => number
  close: () => Promise<void>
}

/** `nodes`: the running nodes, asked at each request (id and base URL). */
export async function startRouteMapServer (nodes: () => Array<{ id: string, url: string }>, adminKey: string): Promise<RouteMapServer> {
  let version = 0
  let last = ''
  let served = 0
  const build = async (): Promise<RouteMapAnswer | null> => {
    const live = nodes()
    for (const node of live) {
      let status: ClusterStatus
      try {
        const res = await fetch(`${node.url}/admin/cluster`, { headers: { authorization: `Bearer ${adminKey}` } })
        if (res.status !== 200) continue
        status = await res.json() as ClusterStatus
      } catch {
        continue
      }
      const owners: Array<string | null> = Array.from({ length: status.partitions }, () => null)
      const known = new Set(live.map(member => member.id))
      for (const view of status.nodes) for (const partition of view.partitions) owners[partition] = known.has(view.id) ? view.id : null
      const key = JSON.stringify(owners)
      if (key !== last) {
        last = key
        version++
      }
      return { version, partitions: status.partitions, nodes: Object.fromEntries(live.map(member => [member.id, { url: member.url }])), owners }
    }
    return null
  }
  const server: Server = createServer((req, res) => {
    if (req.method !== 'GET' || req.url !== '/cluster/routes') {
      res.writeHead(404).end()
      return
    }
    build().then(map => {
      served++
      if (map === null) res.writeHead(503, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 503, message: 'no node answered', errors: [] }))
      else res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(map))
    }, (error: Error) => { res.writeHead(500).end(error.message) })
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}/cluster/routes`,
    served: () => served,
    close: () => new Promise<void>(resolve => { server.closeAllConnections(); server.close(() => resolve()) }),
  }
}
