// `node --max-old-space-size=4000 --import tsx bench/heap-compare.ts <earlier.heapsnapshot> <later.heapsnapshot>`:
// what grew between two heap snapshots of Beacon (a soak's: SOAK_NODE_ARGS=--heapsnapshot-signal=SIGUSR2,
// then `kill -USR2 <pid>` some minutes apart). Prints, from the snapshots' node and edge tables:
//   1. self size and count by constructor (objects, closures and natives by name; others by type), the
//      largest changes first;
//   2. the heap split into what the actors hold (entity states: everything first reached through an
//      `Actor`) and the rest, with the resident actors' count;
//   3. the largest Maps and Sets outside the actors, by their backing table, with their retainer path.
// A leak outside the entities shows in 2 and 3; growth in 2's actor share alone follows the resident
// actors and their states (docs/internals/soak-heap-2026-11-27.md).

import { readFileSync } from 'node:fs'

interface Snapshot {
  snapshot: { meta: { node_fields: string[], node_types: [string[]], edge_fields: string[], edge_types: [string[]] } }
  nodes: number[]
  edges: number[]
  strings: string[]
}

interface Heap {
  byConstructor: Map<string, { count: number, bytes: number }>
  totalBytes: number
  outsideActorsBytes: number
  actors: number
  /** [table bytes, "Map parent.edge > …"] of Maps and Sets outside actors, largest first. */
  collections: Array<[number, string]>
}

function read (file: string): Heap {
  const snap = JSON.parse(readFileSync(file, 'utf8')) as Snapshot
  const { node_fields: nf, edge_fields: ef } = snap.snapshot.meta
  const types = snap.snapshot.meta.node_types[0]
  const edgeTypes = snap.snapshot.meta.edge_types[0]
  const N = nf.length
  const E = ef.length
  const iType = nf.indexOf('type')
  const iName = nf.indexOf('name')
  const iSize = nf.indexOf('self_size')
  const iEdges = nf.indexOf('edge_count')
  const eType = ef.indexOf('type')
  const eName = ef.indexOf('name_or_index')
  const eTo = ef.indexOf('to_node')
  const { nodes, edges, strings } = snap
  const count = nodes.length / N
  const typeOf = (i: number): string => types[nodes[i * N + iType]!]!
  const nameOf = (i: number): string => strings[nodes[i * N + iName]!]!
  const sizeOf = (i: number): number => nodes[i * N + iSize]!
  const isActor = (i: number): boolean => typeOf(i) === 'object' && nameOf(i) === 'Actor'
  const firstEdge = new Uint32Array(count + 1)
  for (let i = 0, e = 0; i < count; i++) {
    firstEdge[i] = e
    e += nodes[i * N + iEdges]! * E
    firstEdge[i + 1] = e
  }

  const byConstructor = new Map<string, { count: number, bytes: number }>()
  let totalBytes = 0
  let actors = 0
  for (let i = 0; i < count; i++) {
    const type = typeOf(i)
    const key = type === 'object' || type === 'closure' || type === 'native' ? `${type}:${nameOf(i)}` : type
    const group = byConstructor.get(key) ?? { count: 0, bytes: 0 }
    group.count++
    group.bytes += sizeOf(i)
    byConstructor.set(key, group)
    totalBytes += sizeOf(i)
    if (isActor(i)) actors++
  }

  // Breadth-first from the root, never entering an actor nor following weak edges.
  const seen = new Uint8Array(count)
  const parent = new Int32Array(count).fill(-1)
  const via: string[] = new Array(count)
  const queue = [0]
  seen[0] = 1
  let outsideActorsBytes = 0
  for (let q = 0; q < queue.length; q++) {
    const i = queue[q]!
    outsideActorsBytes += sizeOf(i)
    for (let e = firstEdge[i]!; e < firstEdge[i + 1]!; e += E) {
      const edgeType = edgeTypes[edges[e + eType]!]!
      if (edgeType === 'weak') continue
      const j = edges[e + eTo]! / N
      if (seen[j] === 1) continue
      seen[j] = 1
      if (isActor(j)) continue
      parent[j] = i
      via[j] = edgeType === 'element' || edgeType === 'hidden' ? `[${edges[e + eName]}]` : strings[edges[e + eName]!]!
      queue.push(j)
    }
  }

  const collections: Array<[number, string]> = []
  for (const i of queue) {
    if (typeOf(i) !== 'object' || (nameOf(i) !== 'Map' && nameOf(i) !== 'Set')) continue
    let bytes = sizeOf(i)
    for (let e = firstEdge[i]!; e < firstEdge[i + 1]!; e += E) if (strings[edges[e + eName]!] === 'table') bytes += sizeOf(edges[e + eTo]! / N)
    const path: string[] = []
    for (let p = i, depth = 0; p > 0 && depth < 4; p = parent[p]!, depth++) path.unshift(`${nameOf(parent[p]!)}.${via[p]}`)
    collections.push([bytes, `${nameOf(i)} ${path.join(' > ')}`])
  }
  collections.sort((a, b) => b[0] - a[0])
  return { byConstructor, totalBytes, outsideActorsBytes, actors, collections: collections.slice(0, 12) }
}

const [earlierFile, laterFile] = process.argv.slice(2)
if (earlierFile === undefined || laterFile === undefined) throw new Error('usage: bench/heap-compare.ts <earlier.heapsnapshot> <later.heapsnapshot>')
const earlier = read(earlierFile)
const later = read(laterFile)
const mb = (bytes: number): string => (bytes / 2 ** 20).toFixed(2) + ' MB'

console.log('1. self size by constructor (largest changes):')
const keys = new Set([...earlier.byConstructor.keys(), ...later.byConstructor.keys()])
const changes = [...keys].map(key => {
  const a = earlier.byConstructor.get(key) ?? { count: 0, bytes: 0 }
  const b = later.byConstructor.get(key) ?? { count: 0, bytes: 0 }
  return { key, bytes: b.bytes - a.bytes, count: b.count - a.count, now: b }
}).sort((a, b) => Math.abs(b.bytes) - Math.abs(a.bytes))
for (const c of changes.slice(0, 20)) console.log(`  ${(c.bytes / 1024).toFixed(0).padStart(8)} KB ${String(c.count).padStart(8)}  (now ${mb(c.now.bytes)}, ${c.now.count})  ${c.key.slice(0, 80)}`)

console.log('2. held by actors / the rest:')
for (const [label, heap] of [['earlier', earlier], ['later', later]] as const) {
  const held = heap.totalBytes - heap.outsideActorsBytes
  console.log(`  ${label}: heap ${mb(heap.totalBytes)}; ${heap.actors} actors hold ${mb(held)} (${(held / Math.max(1, heap.actors) / 1024).toFixed(2)} KB each); the rest ${mb(heap.outsideActorsBytes)}`)
}

console.log('3. largest Maps and Sets outside actors (later snapshot; earlier size of the same path):')
const before = new Map(earlier.collections.map(([bytes, path]) => [path, bytes]))
for (const [bytes, path] of later.collections) console.log(`  ${(bytes / 1024).toFixed(0).padStart(7)} KB (was ${before.has(path) ? (before.get(path)! / 1024).toFixed(0) + ' KB' : '-'})  ${path.slice(0, 140)}`)
