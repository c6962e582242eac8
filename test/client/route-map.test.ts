// The client's route map (src/client/route-map.ts) in process, its source a counting function: when it
// asks for the map (lazily every refreshMs, on a stale hint at most once per hintIntervalMs, one
// request at a time), which maps it takes (the latest answer, whatever its version: a content hash; never a malformed one), and where a
// key goes (partitionOf of the server, the owner's URL).

import { expect } from 'chai'
import { RouteMap, validMap } from '../../src/client/route-map.js'
import { partitionOf } from '../../src/cluster/partition.js'
import type { RouteMapAnswer } from '../../src/client/types.js'

const ACCOUNT = '6f1c2d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f'

function mapOf (version: number, owner: (partition: number) => string | null): RouteMapAnswer {
  return {
    version, partitions: 8,
    nodes: { a: { url: 'http://10.0.0.1:8080' }, b: { url: 'http://10.0.0.2:8080/' } },
    owners: Array.from({ length: 8 }, (_, partition) => owner(partition)),
  }
}

describe('RouteMap (the client\'s partition → node map)', () => {
  let nowMs: number
  let asked: number
  let next: RouteMapAnswer | null
  let routes: RouteMap

  beforeEach(() => {
    nowMs = 0
    asked = 0
    next = mapOf(1, partition => partition % 2 === 0 ? 'a' : 'b')
    routes = new RouteMap({ source: async () => { asked++; return next }, refreshMs: 30_000, hintIntervalMs: 1000, nowMs: () => nowMs })
  })

  it('knows no owner before a map, and asks for one on the first lookup', async () => {
    expect(routes.ownerOf(ACCOUNT, 'v')).to.equal(null)
    expect(asked).to.equal(1)
    await routes.refresh()
    const partition = partitionOf(ACCOUNT, 'v', 8)
    expect(routes.ownerOf(ACCOUNT, 'v')).to.deep.equal(partition % 2 === 0 ? { url: 'http://10.0.0.1:8080', node: 'a' } : { url: 'http://10.0.0.2:8080', node: 'b' })
  })

  it('asks again every refreshMs, lazily, one request at a time', async () => {
    await routes.refresh()
    routes.ownerOf(ACCOUNT, 'v')
    expect(asked).to.equal(1)
    nowMs += 30_000
    routes.ownerOf(ACCOUNT, 'v')
    routes.ownerOf(ACCOUNT, 'w')
    void routes.refresh()
    expect(asked).to.equal(2)
  })

  it('follows a stale hint at most once per hintIntervalMs', async () => {
    await routes.refresh()
    routes.stale()
    expect(asked).to.equal(1)
    nowMs += 1000
    routes.stale()
    routes.stale()
    expect(asked).to.equal(2)
  })

  it('takes the latest map whatever its version (a content hash, not ordered), and ignores a malformed one', async () => {
    next = mapOf(5, () => 'a')
    await routes.refresh()
    next = mapOf(4, () => 'b')
    await routes.refresh()
    expect(routes.version).to.equal(4)
    next = { ...mapOf(6, () => 'b'), owners: ['c'] }
    await routes.refresh()
    expect(routes.version).to.equal(4)
    next = mapOf(6, partition => partition === 0 ? null : 'b')
    await routes.refresh()
    expect(routes.version).to.equal(6)
  })

  it('accepts exactly the documented shape', () => {
    expect(validMap(mapOf(1, () => 'a'))).to.equal(true)
    expect(validMap(mapOf(1, () => null))).to.equal(true)
    expect(validMap({ ...mapOf(1, () => 'a'), partitions: 0 })).to.equal(false)
    expect(validMap({ ...mapOf(1, () => 'a'), version: '1' })).to.equal(false)
    expect(validMap({ ...mapOf(1, () => 'z') })).to.equal(false)
    expect(validMap({ ...mapOf(1, () => 'a'), nodes: { a: { url: 'ftp://x' } } })).to.equal(false)
  })
})
