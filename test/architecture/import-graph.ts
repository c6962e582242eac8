// The import graph of Beacon's own code and the checks on it: every relative import (import, import
// type, export … from, dynamic import()) of every .ts file under the given folders, read with
// TypeScript's own scanner, then checked against a table of layers (docs/architecture.md).

import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, posix, relative, sep } from 'node:path'
import ts from 'typescript'

/** One import: repository-relative paths with `/`, `to` as the .ts file it names. */
export interface Edge { from: string, to: string }

export interface Layer {
  rank: number
  name: string
  /** Repository-relative files, or folders ending in `/`. */
  paths: readonly string[]
}

function sourceFiles (root: string, folder: string): string[] {
  const files: string[] = []
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) walk(path)
      else if (/\.tsx?$/.test(entry.name) && !entry.name.endsWith('.d.ts')) files.push(relative(root, path).split(sep).join('/'))
    }
  }
  walk(join(root, folder))
  return files.sort()
}

/** The source file an import names: `./x.js` is x.ts or x.tsx; `./dir` is dir/index.ts. */
function resolveSource (root: string, target: string): string {
  const stem = target.replace(/\.(js|jsx|ts|tsx)$/, '')
  const candidates = [`${stem}.ts`, `${stem}.tsx`, `${target}/index.ts`, `${target}/index.tsx`]
  return candidates.find(file => existsSync(join(root, file))) ?? `${stem}.ts`
}

/** Every relative import of every source file under `folders` (relative to `root`). */
export function readImportGraph (root: string, folders: readonly string[]): Edge[] {
  const edges: Edge[] = []
  for (const from of folders.flatMap(folder => sourceFiles(root, folder))) {
    const { importedFiles } = ts.preProcessFile(readFileSync(join(root, from), 'utf8'), true, true)
    for (const { fileName } of importedFiles) {
      if (!fileName.startsWith('.')) continue
      edges.push({ from, to: resolveSource(root, posix.normalize(posix.join(dirname(from), fileName))) })
    }
  }
  return edges
}

/** The layer a file belongs to: the longest matching path of the table, or null. */
export function layerOf (file: string, layers: readonly Layer[]): Layer | null {
  let best: Layer | null = null
  let bestLength = -1
  for (const layer of layers) {
    for (const path of layer.paths) {
      const matches = path.endsWith('/') ? file.startsWith(path) : file === path
      if (matches && path.length > bestLength) {
        best = layer
        bestLength = path.length
      }
    }
  }
  return best
}

const edgeKey = ({ from, to }: Edge): string => `${from} -> ${to}`

/** Import cycles, each as the files around it (first file repeated at the end), shortest first. */
export function findCycles (edges: readonly Edge[]): string[][] {
  const next = new Map<string, string[]>()
  for (const { from, to } of edges) next.set(from, [...(next.get(from) ?? []), to])
  // Tarjan's strongly connected components; a component of two or more files holds a cycle.
  let index = 0
  const indexOf = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const onStack = new Set<string>()
  const components: string[][] = []
  const visit = (v: string): void => {
    indexOf.set(v, index)
    low.set(v, index++)
    stack.push(v)
    onStack.add(v)
    for (const w of next.get(v) ?? []) {
      if (!indexOf.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number))
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v) as number, indexOf.get(w) as number))
      }
    }
    if (low.get(v) === indexOf.get(v)) {
      const component: string[] = []
      let w: string
      do {
        w = stack.pop() as string
        onStack.delete(w)
        component.push(w)
      } while (w !== v)
      if (component.length > 1 || (next.get(v) ?? []).includes(v)) components.push(component)
    }
  }
  for (const v of [...next.keys()].sort()) if (!indexOf.has(v)) visit(v)
  // One concrete cycle per component: the shortest way back from its first file.
  return components.map(component => {
    const members = new Set(component)
    const start = [...component].sort()[0] as string
    const previous = new Map<string, string>()
    const queue = [start]
    for (let i = 0; i < queue.length; i++) {
      const v = queue[i] as string
      for (const w of next.get(v) ?? []) {
        if (!members.has(w)) continue
        if (w === start) {
          const path = [v]
          while (path[0] !== start) path.unshift(previous.get(path[0] as string) as string)
          return [...path, start]
        }
        if (!previous.has(w)) {
          previous.set(w, v)
          queue.push(w)
        }
      }
    }
    return [start, start]
  }).sort((a, b) => a.length - b.length)
}

/**
 * Problems of the graph: a file in no layer; an import to a higher layer that the allowlist does not
 * name; an allowlisted import that no longer exists or no longer runs upward (the list only shrinks);
 * an import cycle.
 */
export function layerProblems (edges: readonly Edge[], layers: readonly Layer[], allowedUpward: readonly string[]): string[] {
  const problems: string[] = []
  const files = [...new Set(edges.flatMap(e => [e.from, e.to]))].sort()
  for (const file of files) {
    if (layerOf(file, layers) === null) problems.push(`${file} is in no layer: add its folder to the rank table (test/architecture/layers.test.ts and docs/architecture.md)`)
  }
  const upward = new Set<string>()
  for (const edge of edges) {
    const from = layerOf(edge.from, layers)
    const to = layerOf(edge.to, layers)
    if (from === null || to === null || to.rank <= from.rank) continue
    upward.add(edgeKey(edge))
    if (!allowedUpward.includes(edgeKey(edge))) {
      problems.push(`upward import: ${edgeKey(edge)} (${from.name}, rank ${from.rank}, imports ${to.name}, rank ${to.rank})`)
    }
  }
  for (const key of allowedUpward) {
    if (!upward.has(key)) problems.push(`allowlisted upward import no longer exists (or no longer runs upward): ${key}; delete it from the allowlist`)
  }
  for (const cycle of findCycles(edges)) problems.push(`import cycle: ${cycle.join(' -> ')}`)
  return problems
}
