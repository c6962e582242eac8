// The fallback compiler, for processes that forbid code generation from strings: each leaf
// becomes a closure specialised to its fact and op, and all/any/not become small combinators
// that short-circuit like && and ||. Same semantics as generate-condition.ts (see
// compile-condition.ts); the property tests hold both to the reference interpreter.

import { secondsAgo, utcHour, utcWeekday } from './clock.js'
import { parseFact, type FactRef } from './facts.js'
import { compileGlob } from './glob.js'
import type { Condition, LeafCondition, MatchContext, Predicate, Scalar } from './types.js'

type Getter = (ctx: MatchContext) => unknown

export function closureCondition (cond: Condition): Predicate {
  if ('all' in cond) return allOf(cond.all.map(closureCondition))
  if ('any' in cond) return anyOf(cond.any.map(closureCondition))
  if ('not' in cond) {
    const inner = closureCondition(cond.not)
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
    default: throw new TypeError(`unknown op ${JSON.stringify(op)}; validate conditions before compiling`)
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
