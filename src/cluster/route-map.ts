// The partition → node map clients route by (GET /cluster/routes, and `routes` of GET /admin/cluster):
// which node owns each partition as this node sees the leases, and the base URL clients reach each of
// those nodes at (BEACON_PUBLIC_URL, published with its membership: members.ts). A key's partition is
// partitionOf(account, id, partitions) (partition.ts): the visitorId in lower case for the visitor
// routes and /campaigns/query, the profileId as sent for the profile routes.
//
// `version` is derived from the content (FNV-1a 32-bit of the owners and URLs), not counted: every node
// whose view is the same answers the same version, and any change of an owner or a URL changes it (a
// collision is one in 2^32). Compare versions for equality, never for order.
//
// An owner whose URL is not known yet (a node between its join and its listen) is given as null, like
// a partition without owner: `owners` only names nodes listed in `nodes`. The map is rebuilt only when
// an owner or a URL changed since the last call.

import { fnv1a32 } from './partition.js'

export interface RouteMapAnswer {
  version: number
  partitions: number
  nodes: Record<string, { url: string }>
  owners: Array<string | null>
}

export interface RouteMapSource {
  readonly partitions: number
  /** The node holding the partition's lease as this node sees it, or null. */
  ownerOf (partition: number): string | null
  /** A node's published public URL, or null while unknown. */
  urlOf (node: string): string | null
}

export class RouteMap {
  private readonly source: RouteMapSource
  /** Scratch of current(): the owners and URLs as last read, and the answer made from them. */
  private readonly owners: Array<string | null>
  private readonly urls = new Map<string, string>()
  private answer: RouteMapAnswer | null = null

  constructor (source: RouteMapSource) {
    this.source = source
    this.owners = new Array<string | null>(source.partitions).fill(null)
  }

  /** The map as this node sees it now; the same object while nothing changed. */
  current (): RouteMapAnswer {
    let changed = this.answer === null
    const seen = new Set<string>()
    for (let p = 0; p < this.source.partitions; p++) {
      const owner = this.source.ownerOf(p)
      let url: string | null = null
      if (owner !== null) {
        url = this.source.urlOf(owner)
        if (url !== null && !seen.has(owner)) {
          seen.add(owner)
          if (this.urls.get(owner) !== url) { this.urls.set(owner, url); changed = true }
        }
      }
      const named = url === null ? null : owner
      if (this.owners[p] !== named) { this.owners[p] = named; changed = true }
    }
    for (const node of [...this.urls.keys()]) {
      if (!seen.has(node)) { this.urls.delete(node); changed = true }
    }
    if (changed) this.answer = this.build()
    return this.answer!
  }

  private build (): RouteMapAnswer {
    const ids = [...this.urls.keys()].sort()
    const nodes: Record<string, { url: string }> = {}
    for (const id of ids) nodes[id] = { url: this.urls.get(id)! }
    const owners = [...this.owners]
    const canonical = `${this.source.partitions}|${ids.map(id => `${id}=${this.urls.get(id)!}`).join(',')}|${owners.map(owner => owner ?? '').join(',')}`
    return { version: fnv1a32(canonical), partitions: this.source.partitions, nodes, owners }
  }
}
