// Where a campaign can be filed in the index besides the trigger tree. A key is a fact every
// matching event must carry with one of a few known values, read off the definition:
// - field: a leaf `eq`/`in` on event.* or attribute.* that the rule requires (a top-level leaf,
//   or a leaf under top-level `all`s), e.g. event.sku in [...] or event.category eq "shoes";
// - path: trigger.paths whose patterns are literal paths or start with a literal directory,
//   e.g. "/sale" (exact) or "/c/shoes/*" (prefix "/c/shoes/").
// Keys only narrow the candidates: a candidate is still tested in full, so a key that is
// weaker than it looks costs time, never correctness.

import { parseFact } from './facts.js'
import { hasWildcard, literalPrefix } from './glob.js'
import type { Condition, LeafCondition, Scalar } from './types.js'

export interface FieldKey {
  kind: 'field'
  source: 'event' | 'attribute'
  field: string
  values: Scalar[]
  // The rule leaf the key comes from: guaranteed by the lookup, so left out of the residual rule.
  leaf: LeafCondition
}

export interface PathKey {
  kind: 'path'
  exact: string[]
  prefixes: string[]
}

export type IndexKey = FieldKey | PathKey

function requiredLeaves (cond: Condition, out: LeafCondition[]): void {
  if ('all' in cond) {
    for (const child of cond.all) requiredLeaves(child, out)
  } else if ('any' in cond) {
    if (cond.any.length === 1 && cond.any[0] !== undefined) requiredLeaves(cond.any[0], out)
  } else if (!('not' in cond)) {
    out.push(cond)
  }
}

export function fieldKeys (rule: Condition | undefined): FieldKey[] {
  if (rule === undefined) return []
  const leaves: LeafCondition[] = []
  requiredLeaves(rule, leaves)
  const keys: FieldKey[] = []
  for (const leaf of leaves) {
    if (leaf.op !== 'eq' && leaf.op !== 'in') continue
    const ref = parseFact(leaf.fact)
    if (ref === null || (ref.source !== 'event' && ref.source !== 'attribute')) continue
    const values = leaf.op === 'eq' ? [leaf.value as Scalar] : [...new Set(leaf.value as readonly Scalar[])]
    keys.push({ kind: 'field', source: ref.source, field: ref.key, values, leaf })
  }
  return keys
}

/**
 * The rule minus `leaf`, for a campaign found through that leaf's key (null: nothing left to
 * test). Only required positions are visited — `all` children and a lone `any` child — which is
 * where fieldKeys found the leaf, so the result is equivalent whenever the leaf holds.
 */
export function withoutLeaf (cond: Condition, leaf: LeafCondition): Condition | null {
  if (cond === leaf) return null
  if ('all' in cond) {
    const kept: Condition[] = []
    for (const child of cond.all) {
      const rest = withoutLeaf(child, leaf)
      if (rest !== null) kept.push(rest)
    }
    return kept.length === 0 ? null : kept.length === 1 ? kept[0] as Condition : { all: kept }
  }
  if ('any' in cond && cond.any.length === 1) return withoutLeaf(cond.any[0] as Condition, leaf)
  return cond
}

/**
 * Null when some pattern has no literal directory to file under (e.g. "*.html" or "/*").
 * Prefixes are pruned so that no path can reach the campaign twice: a prefix inside another
 * prefix, and an exact path under a prefix, are dropped (the shorter prefix covers them).
 */
export function pathKey (paths: readonly string[] | undefined): PathKey | null {
  if (paths === undefined) return null
  const exact = new Set<string>()
  const prefixes = new Set<string>()
  for (const pattern of paths) {
    if (!hasWildcard(pattern)) { exact.add(pattern); continue }
    const literal = literalPrefix(pattern)
    const cut = literal.lastIndexOf('/')
    if (cut < 1) return null
    prefixes.add(literal.slice(0, cut + 1))
  }
  const kept = [...prefixes].filter(p => ![...prefixes].some(q => q !== p && p.startsWith(q)))
  return {
    kind: 'path',
    exact: [...exact].filter(e => !kept.some(p => e.startsWith(p))),
    prefixes: kept,
  }
}
