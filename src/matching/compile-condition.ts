// Turns a validated condition into a predicate once, so events never walk rule JSON: generated
// code where the process allows `new Function` (measured faster: one function per rule shape
// with inlined property reads), composed closures otherwise.
//
// Semantics (test/matching/reference.ts implements the same table independently):
// a fact is missing when its value is undefined or null; "scalar" means string, number or boolean.
//   eq          fact === value                    (missing: false)
//   ne          fact is a scalar and !== value    (missing, array or object: false)
//   in          fact is one of the values         (missing, array or object: false)
//   nin         fact is a scalar, none of values  (missing, array or object: false)
//   gt gte lt lte  fact is a number and compares  (strings are never coerced)
//   contains    fact is an array holding value; for `segment`, the visitor is in that segment
//   startsWith endsWith glob  fact is a string and matches
//   exists      (fact is not missing) === value
// So `ne` is not the negation of `eq`: use {"not": {... "eq" ...}} to include missing facts.

import { closureCondition } from './closure-condition.js'
import { codegenAvailable, generateCondition } from './generate-condition.js'
import type { Condition, Predicate } from './types.js'

export function compileCondition (cond: Condition): Predicate {
  const ordered = selectiveFirst(cond)
  return codegenAvailable ? generateCondition(ordered) : closureCondition(ordered)
}

// Most campaigns an event reaches fail their rule, so `all` tests first the children most
// likely to fail cheaply: segment membership and equalities before ranges and string ops,
// and the usually-true ones (ne, nin, exists, negations, nested groups) last. Conditions have
// no side effects, so the order changes the cost, never the result.
function rank (cond: Condition): number {
  if ('all' in cond || 'any' in cond || 'not' in cond) return 5
  if (cond.fact === 'segment') return 0
  switch (cond.op) {
    case 'eq': case 'in': return 1
    case 'contains': return 2
    case 'gt': case 'gte': case 'lt': case 'lte': case 'startsWith': case 'endsWith': case 'glob': return 3
    case 'ne': case 'nin': case 'exists': return 4
  }
}

function selectiveFirst (cond: Condition): Condition {
  if ('all' in cond) return { all: cond.all.map(selectiveFirst).sort((a, b) => rank(a) - rank(b)) }
  if ('any' in cond) return { any: cond.any.map(selectiveFirst) }
  if ('not' in cond) return { not: selectiveFirst(cond.not) }
  return cond
}
