// Turns a validated condition into a predicate once, so events never walk rule JSON.
// Each leaf becomes a closure specialised to its fact and op; all/any/not become small
// combinators that short-circuit like && and ||.
//
// Semantics (the reference interpreter implements the same table independently):
// a fact is missing when its value is undefined or null; "scalar" means string, number or boolean.
//   eq          fact === value                    (missing: false)
//   ne          fact is a scalar and !== value    (missing, array or object: false)
//   in          fact is one of the values         (missing: false)
//   nin         fact is a scalar, none of values  (missing, array or object: false)
//   gt gte lt lte  fact is a number and compares  (strings are never coerced)
//   contains    fact is an array holding value; for `segment`, the visitor is in that segment
//   startsWith endsWith glob  fact is a string and matches
//   exists      (fact is not missing) === value
// So `ne` is not the negation of `eq`: use {"not": {... "eq" ...}} to include missing facts.

import { secondsAgo, utcHour, utcWeekday } from './clock.js'
import { parseFact, type FactRef } from './facts.js'
import { compileGlob } from './glob.js'
import type { Condition, LeafCondition, MatchContext, Predicate, Scalar } from './types.js'

type Getter = (ctx: MatchContext) => unknown

export function compileCondition (cond: Condition): Predicate {
  if ('all' in cond) return allOf(cond.all.map(compileCondition))
  if ('any' in cond) return anyOf(cond.any.map(compileCondition))
  if ('not' in cond) {
    const inner = compileCondition(cond.not)
    return ctx => !inner(ctx)
  }
  return compileLeaf(cond)
}

function allOf (preds: Predicate[]): Predicate {
  const [a, b, c] = preds
  if (preds.length === 1 && a !== undefined) return a
  if (preds.length === 2 && a !== undefined && b !== undefined) return ctx => a(ctx) && b(ctx)
  if (preds.length === 3 && a !== undefined && b !== undefined && c !== undefined) return ctx => a(ctx) && b(ctx) && c(ctx)
  const n = preds.length
  return ctx => {
    for (let i = 0; i < n; i++) if (!(preds[i] as Predicate)(ctx)) return false
    return true
  }
}

function anyOf (preds: Predicate[]): Predicate {
  const [a, b, c] = preds
  if (preds.length === 1 && a !== undefined) return a
  if (preds.length === 2 && a !== undefined && b !== undefined) return ctx => a(ctx) || b(ctx)
  if (preds.length === 3 && a !== undefined && b !== undefined && c !== undefined) return ctx => a(ctx) || b(ctx) || c(ctx)
  const n = preds.length
  return ctx => {
    for (let i = 0; i < n; i++) if ((preds[i] as Predicate)(ctx)) return true
    return false
  }
}

function getter (ref: Exclude<FactRef, { source: 'segment' }>): Getter {
  switch (ref.source) {
    case 'event': { const key = ref.key; return ctx => ctx.event[key] }
    case 'attribute': { const key = ref.key; return ctx => ctx.attributes[key] }
    case 'visitorList': { const key = ref.key; return ctx => ctx.visitor[key] }
    case 'visitorNumber':
      switch (ref.key) {
        case 'firstSeenSecondsAgo': return ctx => secondsAgo(ctx.nowMs, ctx.visitor.firstSeenMs)
        case 'lastSeenSecondsAgo': return ctx => secondsAgo(ctx.nowMs, ctx.visitor.lastSeenMs)
        default: { const key = ref.key; return ctx => ctx.visitor[key] }
      }
    case 'time': return ref.key === 'hour' ? ctx => utcHour(ctx.nowMs) : ctx => utcWeekday(ctx.nowMs)
  }
}

function isScalar (v: unknown): boolean {
  const t = typeof v
  return t === 'string' || t === 'number' || t === 'boolean'
}

function compileLeaf (leaf: LeafCondition): Predicate {
  const ref = parseFact(leaf.fact)
  if (ref === null) throw new TypeError(`unknown fact ${JSON.stringify(leaf.fact)}; validate conditions before compiling`)
  const { op, value } = leaf
  if (ref.source === 'segment') {
    if (op !== 'contains' || typeof value !== 'string') throw new TypeError('the segment fact only supports contains with a string')
    return ctx => ctx.segments.has(value)
  }
  const get = getter(ref)
  switch (op) {
    case 'eq': return ctx => get(ctx) === value
    case 'ne': return ctx => { const v = get(ctx); return v !== value && isScalar(v) }
    case 'in': { const set = new Set<unknown>(list(value)); return ctx => set.has(get(ctx)) }
    case 'nin': { const set = new Set<unknown>(list(value)); return ctx => { const v = get(ctx); return isScalar(v) && !set.has(v) } }
    case 'gt': { const n = num(value); return ctx => { const v = get(ctx); return typeof v === 'number' && v > n } }
    case 'gte': { const n = num(value); return ctx => { const v = get(ctx); return typeof v === 'number' && v >= n } }
    case 'lt': { const n = num(value); return ctx => { const v = get(ctx); return typeof v === 'number' && v < n } }
    case 'lte': { const n = num(value); return ctx => { const v = get(ctx); return typeof v === 'number' && v <= n } }
    case 'contains': return ctx => { const v = get(ctx); return Array.isArray(v) && v.includes(value) }
    case 'startsWith': { const s = str(value); return ctx => { const v = get(ctx); return typeof v === 'string' && v.startsWith(s) } }
    case 'endsWith': { const s = str(value); return ctx => { const v = get(ctx); return typeof v === 'string' && v.endsWith(s) } }
    case 'glob': { const test = compileGlob(str(value)); return ctx => { const v = get(ctx); return typeof v === 'string' && test(v) } }
    case 'exists': return value === true
      ? ctx => { const v = get(ctx); return v !== undefined && v !== null }
      : ctx => { const v = get(ctx); return v === undefined || v === null }
  }
}

function list (value: Scalar | readonly Scalar[]): readonly Scalar[] {
  if (!Array.isArray(value)) throw new TypeError('in/nin need an array value; validate conditions before compiling')
  return value
}

function num (value: Scalar | readonly Scalar[]): number {
  if (typeof value !== 'number') throw new TypeError('comparisons need a number value; validate conditions before compiling')
  return value
}

function str (value: Scalar | readonly Scalar[]): string {
  if (typeof value !== 'string') throw new TypeError('string ops need a string value; validate conditions before compiling')
  return value
}
