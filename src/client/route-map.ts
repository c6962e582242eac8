// Where a key is served in cluster mode: the partition → node map of GET /cluster/routes, kept by the
// client and asked again when it may be stale: on a 503 partition_moved, on a Beacon-Route header naming
// another node than the one chosen, and every `refreshMs`. Refreshes are lazy (checked on each
// request, run beside it) and never more than one at a time; until a map is known, or when the
// endpoint is absent (embedded mode), a request goes to any node.

import { partitionOf } from '../cluster/partition.js'
import type { RouteMapAnswer } from './types.js'

/** Fetches the map; null when there is none to be had (no endpoint, an unusable answer). */
export type RouteMapSource = () => Promise<RouteMapAnswer | null>

export interface RouteMapOptions {
  source: RouteMapSource
  refreshMs: number
  /** Refreshes on a Beacon-Route hint come at most this often. */
  hintIntervalMs: number
  nowMs: () => number
}

export class RouteMap {
  private readonly source: RouteMapSource
  private readonly refreshMs: number
  private readonly hintIntervalMs: number
  private readonly nowMs: () => number
  private map: RouteMapAnswer | null = null
  /** The base URL of each partition's owner, null where none is known. */
  private urls: Array<string | null> = []
  private fetchedAtMs = -Infinity
  private refreshing: Promise<void> | null = null

  constructor ({ source, refreshMs, hintIntervalMs, nowMs }: RouteMapOptions) {
    this.source = source
    this.refreshMs = refreshMs
    this.hintIntervalMs = hintIntervalMs
    this.nowMs = nowMs
  }

  /** The version of the map held, or null before one is known. */
  get version (): number | null {
    return this.map?.version ?? null
  }

  /** The owner's base URL and node id for (account, id), or null when unknown (send it to any node). Starts a refresh when due. */
  ownerOf (account: string, id: string): { url: string, node: string } | null {
    if (this.nowMs() - this.fetchedAtMs >= this.refreshMs) void this.refresh()
    const map = this.map
    if (map === null) return null
    const partition = partitionOf(account, id, map.partitions)
    const url = this.urls[partition]
    if (url === null || url === undefined) return null
    return { url, node: map.owners[partition]! }
  }

  /** The node id serving `url` in the map held, or null. */
  nodeAt (url: string): string | null {
    if (this.map === null) return null
    for (const [id, node] of Object.entries(this.map.nodes)) if (trimSlash(node.url) === url) return id
    return null
  }

  /**
   * A hint that the map is stale (an answer's Beacon-Route named another node): refreshed unless it was
   * asked within `hintIntervalMs`, so a node that lags the map does not make every answer a refresh.
   */
  stale (): void {
    if (this.nowMs() - this.fetchedAtMs >= this.hintIntervalMs) void this.refresh()
  }

  /** Asks for the map again (joined to one under way); resolves once it settled, never rejects. */
  refresh (): Promise<void> {
    this.refreshing ??= this.load().finally(() => { this.refreshing = null })
    return this.refreshing
  }

  private async load (): Promise<void> {
    // Stamped first: a failing source is asked again after refreshMs, not on every request.
    this.fetchedAtMs = this.nowMs()
    let answer: RouteMapAnswer | null
    try {
      answer = await this.source()
    } catch {
      return
    }
    if (answer === null || !validMap(answer)) return
    // Versions are content hashes (src/cluster/route-map.ts), equal or not, never ordered: the map is
    // the latest answer (refreshes run one at a time). A node lagging a change may answer an older map;
    // the next answer whose Beacon-Route names another node asks again.
    this.map = answer
    this.urls = answer.owners.map(owner => owner === null ? null : trimSlash(answer.nodes[owner]?.url ?? '') || null)
  }
}

function trimSlash (url: string): string {
  return url.endsWith('/') ? url.replace(/\/+$/, '') : url
}

/** The answer has exactly the documented shape (an unusable map is ignored, not half used). */
export function validMap (value: unknown): value is RouteMapAnswer {
  if (typeof value !== 'object' || value === null) return false
  const map = value as Partial<RouteMapAnswer>
  if (!Number.isInteger(map.version) || !Number.isInteger(map.partitions) || map.partitions! < 1) return false
  if (typeof map.nodes !== 'object' || map.nodes === null || !Array.isArray(map.owners) || map.owners.length !== map.partitions) return false
  for (const node of Object.values(map.nodes)) {
    if (typeof node !== 'object' || node === null || typeof node.url !== 'string' || !/^https?:\/\//.test(node.url)) return false
  }
  return map.owners.every(owner => owner === null || (typeof owner === 'string' && Object.hasOwn(map.nodes!, owner)))
}
