// Checks a condition tree and collects every problem with the JSON pointer of its node, so an
// admin sees all mistakes in one answer. Anything this accepts compiles and evaluates without
// throwing; anything it refuses is reported, never silently fixed.

import { errorItem, type ErrorItem } from '../errors.js'
import { factType, opsFor, parseFact, type FactType } from './facts.js'
import { globProblem } from './glob.js'
import { pointer } from './json-pointer.js'
import { OPS, type Op } from './types.js'

export const DEPTH_MAX = 16
export const LEAVES_MAX = 64
export const LIST_VALUES_MAX = 1000

interface Walk {
  errors: ErrorItem[]
  leaves: number
}

export function isPlainObject (v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

function isOp (v: unknown): v is Op {
  return typeof v === 'string' && (OPS as readonly string[]).includes(v)
}

/**
 * `path` is the pointer of `cond` inside the enclosing document ('' for a bare condition).
 * Depth counts nodes from the root (the root is depth 1), so at most 16 levels of nodes.
 */
export function validateCondition (cond: unknown, path = ''): ErrorItem[] {
  const walk: Walk = { errors: [], leaves: 0 }
  visit(cond, path, 1, walk)
  if (walk.leaves > LEAVES_MAX) {
    walk.errors.push(errorItem('invalid_campaign', path, `the condition has ${walk.leaves} leaves; at most ${LEAVES_MAX} are allowed`))
  }
  return walk.errors
}

function visit (node: unknown, path: string, depth: number, walk: Walk): void {
  const fail = (at: string, message: string): void => { walk.errors.push(errorItem('invalid_campaign', at, message)) }
  if (depth > DEPTH_MAX) {
    fail(path, `conditions nest deeper than ${DEPTH_MAX} levels`)
    return
  }
  if (!isPlainObject(node)) {
    fail(path, 'a condition must be an object: {"all": [...]}, {"any": [...]}, {"not": ...} or {"fact", "op", "value"}')
    return
  }
  const shape = Object.hasOwn(node, 'all') ? 'all' : Object.hasOwn(node, 'any') ? 'any' : Object.hasOwn(node, 'not') ? 'not' : 'leaf'
  const allowed = shape === 'leaf' ? ['fact', 'op', 'value'] : [shape]
  for (const key of Object.keys(node)) {
    if (!allowed.includes(key)) fail(pointer(path, key), shape === 'leaf' ? `unknown key "${key}" in a leaf (expected fact, op, value)` : `unknown key "${key}" beside "${shape}"`)
  }
  if (shape === 'not') {
    visit(node.not, pointer(path, 'not'), depth + 1, walk)
    return
  }
  if (shape === 'all' || shape === 'any') {
    const list = node[shape]
    const at = pointer(path, shape)
    if (!Array.isArray(list)) fail(at, `"${shape}" must be an array of conditions`)
    else if (list.length === 0) fail(at, `"${shape}" must not be empty`)
    else list.forEach((child, i) => { visit(child, pointer(at, i), depth + 1, walk) })
    return
  }
  walk.leaves++
  visitLeaf(node, path, fail)
}

function visitLeaf (node: Record<string, unknown>, path: string, fail: (at: string, message: string) => void): void {
  const { fact, op } = node
  let type: FactType | null = null
  if (fact === undefined) fail(pointer(path, 'fact'), 'fact is required')
  else if (typeof fact !== 'string') fail(pointer(path, 'fact'), 'fact must be a string')
  else {
    const ref = parseFact(fact)
    if (ref === null) fail(pointer(path, 'fact'), `unknown fact "${fact}" (expected event.<field>, attribute.<name>, segment, visitor.<metric>, time.hour or time.weekday)`)
    else type = factType(ref)
  }
  if (op === undefined) fail(pointer(path, 'op'), 'op is required')
  else if (!isOp(op)) fail(pointer(path, 'op'), `unknown op ${JSON.stringify(op)} (expected one of ${OPS.join(', ')})`)
  if (!isOp(op)) return
  if (type !== null && !opsFor(type).includes(op)) {
    fail(pointer(path, 'op'), `op "${op}" does not apply to fact "${String(fact)}" (allowed: ${opsFor(type).join(', ')})`)
    return
  }
  const at = pointer(path, 'value')
  if (!Object.hasOwn(node, 'value')) {
    fail(at, 'value is required')
    return
  }
  for (const problem of valueProblems(op, type ?? 'any', node.value)) {
    fail(problem.at === null ? at : pointer(at, problem.at), problem.message)
  }
}

// The scalar a fact can equal or hold: numbers for counters, strings for lists and segments.
function scalarProblem (type: FactType, v: unknown): string | null {
  if (type === 'number') return typeof v === 'number' && Number.isFinite(v) ? null : 'must be a finite number for this fact'
  if (type === 'list' || type === 'set') return typeof v === 'string' ? null : 'must be a string for this fact'
  if (typeof v === 'string' || typeof v === 'boolean') return null
  if (typeof v === 'number') return Number.isFinite(v) ? null : 'must be a finite number'
  return 'must be a string, number or boolean'
}

interface ValueProblem { at: number | null, message: string }

function valueProblems (op: Op, type: FactType, v: unknown): ValueProblem[] {
  const whole = (message: string | null): ValueProblem[] => message === null ? [] : [{ at: null, message }]
  switch (op) {
    case 'eq': case 'ne': case 'contains':
      return whole(scalarProblem(type, v))
    case 'in': case 'nin': {
      if (!Array.isArray(v)) return whole(`"${op}" needs an array of values`)
      if (v.length === 0) return whole(`"${op}" needs at least one value`)
      if (v.length > LIST_VALUES_MAX) return whole(`"${op}" takes at most ${LIST_VALUES_MAX} values`)
      const problems: ValueProblem[] = []
      v.forEach((item: unknown, i) => {
        const message = scalarProblem(type, item)
        if (message !== null) problems.push({ at: i, message })
      })
      return problems
    }
    case 'gt': case 'gte': case 'lt': case 'lte':
      return whole(typeof v === 'number' && Number.isFinite(v) ? null : `"${op}" needs a finite number`)
    case 'startsWith': case 'endsWith':
      return whole(typeof v === 'string' ? null : `"${op}" needs a string`)
    case 'glob':
      return whole(typeof v === 'string' ? globProblem(v) : '"glob" needs a string pattern')
    case 'exists':
      return whole(typeof v === 'boolean' ? null : '"exists" needs true or false')
  }
}
