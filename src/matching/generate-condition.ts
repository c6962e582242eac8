// Code generation for conditions: each condition becomes the source of one JS function with
// fact reads inlined as named property loads, compiled with `new Function`. Constants stay out
// of the source: they are parameters of a factory, so every rule of the same shape — same
// structure, facts and ops — shares one compiled function that gets hot and optimised, and
// each rule's constants sit directly in its closure (one pointer away from the code).

import { secondsAgo, utcHour, utcWeekday } from './clock.js'
import { parseFact, type FactRef } from './facts.js'
import { compileGlob } from './glob.js'
import type { Condition, Predicate } from './types.js'

type Factory = (h: Helpers, ...k: unknown[]) => Predicate
interface Helpers { hour: (ms: number) => number, weekday: (ms: number) => number, ago: (now: number, then: number) => number, scalar: (v: unknown) => boolean }
const HELPERS: Helpers = {
  hour: utcHour,
  weekday: utcWeekday,
  ago: secondsAgo,
  scalar: v => typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean',
}

// Shapes are few in practice; the bound only stops a pathological stream of distinct shapes
// from growing the cache forever (it is then simply rebuilt).
const SHAPES_MAX = 5000
const factories = new Map<string, Factory>()

const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/
// Field names are validated (letters, digits, _ and -), so JSON.stringify is a safe literal.
const prop = (obj: string, key: string): string => IDENT.test(key) ? `${obj}.${key}` : `${obj}[${JSON.stringify(key)}]`

function read (ref: Exclude<FactRef, { source: 'segment' }>): string {
  switch (ref.source) {
    case 'event': return prop('c.event', ref.key)
    case 'attribute': return prop('c.attributes', ref.key)
    case 'visitorList': return prop('c.visitor', ref.key)
    case 'visitorNumber':
      if (ref.key === 'firstSeenSecondsAgo') return 'h.ago(c.nowMs, c.visitor.firstSeenMs)'
      if (ref.key === 'lastSeenSecondsAgo') return 'h.ago(c.nowMs, c.visitor.lastSeenMs)'
      return prop('c.visitor', ref.key)
    case 'time': return ref.key === 'hour' ? 'h.hour(c.nowMs)' : 'h.weekday(c.nowMs)'
  }
}

function emit (cond: Condition, k: unknown[]): string {
  if ('all' in cond) return '(' + cond.all.map(c => emit(c, k)).join(' && ') + ')'
  if ('any' in cond) return '(' + cond.any.map(c => emit(c, k)).join(' || ') + ')'
  if ('not' in cond) return '!' + emit(cond.not, k)
  const ref = parseFact(cond.fact)
  if (ref === null) throw new TypeError(`unknown fact ${JSON.stringify(cond.fact)}; validate conditions before compiling`)
  const { op, value } = cond
  const constant = (v: unknown): string => { k.push(v); return `k${k.length - 1}` }
  if (ref.source === 'segment') {
    if (op !== 'contains') throw new TypeError('the segment fact only supports contains; validate conditions before compiling')
    return `c.segments.has(${constant(value)})`
  }
  const v = `(v = ${read(ref)})`
  switch (op) {
    case 'eq': return `(${read(ref)} === ${constant(value)})`
    case 'ne': return `(${v} !== ${constant(value)} && h.scalar(v))`
    case 'in': return `(${v}, ${member(value, constant)})`
    case 'nin': return `(h.scalar(${v}) && !${member(value, constant)})`
    case 'gt': return `(typeof ${v} === 'number' && v > ${constant(value)})`
    case 'gte': return `(typeof ${v} === 'number' && v >= ${constant(value)})`
    case 'lt': return `(typeof ${v} === 'number' && v < ${constant(value)})`
    case 'lte': return `(typeof ${v} === 'number' && v <= ${constant(value)})`
    case 'contains': return `(Array.isArray(${v}) && v.includes(${constant(value)}))`
    case 'startsWith': return `(typeof ${v} === 'string' && v.startsWith(${constant(value)}))`
    case 'endsWith': return `(typeof ${v} === 'string' && v.endsWith(${constant(value)}))`
    case 'glob':
      if (typeof value !== 'string') throw new TypeError('glob needs a string pattern; validate conditions before compiling')
      return `(typeof ${v} === 'string' && ${constant(compileGlob(value))}(v))`
    case 'exists': return value === true ? `(${v} !== undefined && v !== null)` : `(${v} === undefined || v === null)`
    default: throw new TypeError(`unknown op ${JSON.stringify(op)}; validate conditions before compiling`)
  }
}

// Short lists compare inline (no Set to chase in memory); long ones use a Set.
const INLINE_LIST = 8

function member (values: unknown, constant: (v: unknown) => string): string {
  if (!Array.isArray(values)) throw new TypeError('in/nin need an array value; validate conditions before compiling')
  if (values.length > INLINE_LIST) return `${constant(new Set(values))}.has(v)`
  return '(' + [...new Set(values)].map(x => `v === ${constant(x)}`).join(' || ') + ')'
}

/** False when the process forbids code from strings (--disallow-code-generation-from-strings). */
export const codegenAvailable: boolean = (() => {
  try {
    // eslint-disable-next-line no-new-func -- the probe for the code generation this module exists for
    return (new Function('return true') as () => boolean)()
  } catch {
    return false
  }
})()

export function generateCondition (cond: Condition): Predicate {
  const k: unknown[] = []
  const body = `return function rule (c) { let v; return ${emit(cond, k)} }`
  let factory = factories.get(body)
  if (factory === undefined) {
    if (factories.size >= SHAPES_MAX) factories.clear()
    // eslint-disable-next-line no-new-func -- compiled conditions are this module's purpose (constants passed as arguments, never inlined)
    factory = new Function('h', ...k.map((_, i) => `k${i}`), `'use strict'; ${body}`) as Factory
    factories.set(body, factory)
  }
  return factory(HELPERS, ...k)
}
