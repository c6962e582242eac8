// Segment rules: the campaign condition language plus behaviour over time windows,
//   { "fact": "count", "event": "productView", "where"?: <condition>, "within"?: "7d", "op": "gte", "value": 3 }
//   { "fact": "sum", "event": "purchase", "field": "orderTotal", "within"?: "30d", "op": "gte", "value": 500 }
// Validated and compiled when a segment is saved; window leaves become reads of the entity's
// bucketed counters (windows.ts), every other leaf is compiled by the campaign engine.

import { createHash } from 'node:crypto'
import { errorItem, type ErrorItem } from '../errors.js'
import { compileCondition, validateCondition, DEPTH_MAX, LEAVES_MAX, type Condition, type MatchContext } from '../matching/index.js'
import { BUCKETS_PER_WINDOW, parseWithin, windowValue, type WindowSpec, type Windows } from './windows.js'

export interface SegmentDef {
  description?: string
  rule?: unknown
}

/** What a compiled rule reads: the usual match context plus the entity's window counters. */
export interface SegmentContext extends MatchContext {
  windows: Windows
}

export type SegmentTest = (ctx: SegmentContext) => boolean

const WINDOW_OPS = ['eq', 'ne', 'gt', 'gte', 'lt', 'lte'] as const
type WindowOp = typeof WINDOW_OPS[number]
const NAME = /^[A-Za-z0-9_.:-]{1,128}$/

function isObject (v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

function isWindowLeaf (node: Record<string, unknown>): boolean {
  return node.fact === 'count' || node.fact === 'sum'
}

/** Every problem of a segment definition, each with the JSON pointer of its node. */
export function validateSegment (body: unknown): ErrorItem[] {
  const errors: ErrorItem[] = []
  const fail = (field: string, message: string): void => { errors.push(errorItem('invalid_segment', field, message)) }
  if (!isObject(body)) {
    fail('', 'a segment must be a JSON object {description?, rule?}')
    return errors
  }
  for (const key of Object.keys(body)) if (key !== 'description' && key !== 'rule') fail(`/${key}`, `unknown key "${key}" (expected description, rule)`)
  if (body.description !== undefined && (typeof body.description !== 'string' || body.description.length > 1000)) {
    fail('/description', 'description must be a string of at most 1000 characters')
  }
  if (body.rule !== undefined) {
    const leaves = { count: 0 }
    visit(body.rule, '/rule', 1, leaves, errors, fail)
    if (leaves.count > LEAVES_MAX) fail('/rule', `the rule has ${leaves.count} leaves; at most ${LEAVES_MAX} are allowed`)
  }
  return errors
}

function visit (node: unknown, path: string, depth: number, leaves: { count: number }, errors: ErrorItem[], fail: (field: string, message: string) => void): void {
  if (depth > DEPTH_MAX) return fail(path, `conditions nest deeper than ${DEPTH_MAX} levels`)
  if (!isObject(node)) return fail(path, 'a condition must be an object')
  for (const group of ['all', 'any'] as const) {
    if (Object.hasOwn(node, group)) {
      const children = node[group]
      if (!Array.isArray(children) || children.length === 0) return fail(`${path}/${group}`, `"${group}" must be a non-empty array of conditions`)
      if (Object.keys(node).length > 1) fail(path, `nothing may stand beside "${group}"`)
      children.forEach((child, i) => visit(child, `${path}/${group}/${i}`, depth + 1, leaves, errors, fail))
      return
    }
  }
  if (Object.hasOwn(node, 'not')) {
    if (Object.keys(node).length > 1) fail(path, 'nothing may stand beside "not"')
    return visit(node.not, `${path}/not`, depth + 1, leaves, errors, fail)
  }
  leaves.count++
  if (!isWindowLeaf(node)) {
    // An ordinary leaf: the campaign engine's own validation, under this segment's code.
    for (const item of validateCondition(node, path)) errors.push({ ...item, code: 'invalid_segment' })
    return
  }
  const allowed = new Set(['fact', 'event', 'where', 'within', 'op', 'value', ...(node.fact === 'sum' ? ['field'] : [])])
  for (const key of Object.keys(node)) if (!allowed.has(key)) fail(`${path}/${key}`, `unknown key "${key}" in a ${String(node.fact)} leaf`)
  if (typeof node.event !== 'string' || !NAME.test(node.event)) fail(`${path}/event`, 'event must be an event type name')
  if (node.fact === 'sum' && (typeof node.field !== 'string' || !NAME.test(node.field))) fail(`${path}/field`, 'field must name a numeric field of the event')
  if (node.within !== undefined && (typeof node.within !== 'string' || parseWithin(node.within) === null)) {
    fail(`${path}/within`, 'within must be like "30m", "24h" or "7d", at most 90 days')
  }
  if (!(WINDOW_OPS as readonly unknown[]).includes(node.op)) fail(`${path}/op`, `op must be one of ${WINDOW_OPS.join(', ')}`)
  if (typeof node.value !== 'number' || !Number.isFinite(node.value)) fail(`${path}/value`, 'value must be a number')
  if (node.where !== undefined) {
    // `where` tests the event itself: only event facts make sense there.
    for (const item of validateCondition(node.where, `${path}/where`)) errors.push({ ...item, code: 'invalid_segment' })
    if (!onlyEventFacts(node.where)) fail(`${path}/where`, 'where may only test event.<field> facts')
  }
}

function onlyEventFacts (node: unknown): boolean {
  if (!isObject(node)) return true
  if (Array.isArray(node.all)) return node.all.every(onlyEventFacts)
  if (Array.isArray(node.any)) return node.any.every(onlyEventFacts)
  if (node.not !== undefined) return onlyEventFacts(node.not)
  return typeof node.fact === 'string' && node.fact.startsWith('event.')
}

/**
 * Compile a validated rule. Window specs it reads are added to `specs` (shared across an account's
 * segments), their keys to `used` when given. `windows`: '' for the account's shared windows, or a
 * backfilled segment's own (its backfill's id: windows rebuilt from the log, src/jobs/segment-backfill.ts).
 */
export function compileRule (rule: unknown, specs: Map<string, WindowSpec>, used: Set<string> | null = null, windows = ''): SegmentTest {
  const node = rule as Record<string, unknown>
  if (Array.isArray(node.all)) {
    const tests = node.all.map(child => compileRule(child, specs, used, windows))
    return ctx => tests.every(test => test(ctx))
  }
  if (Array.isArray(node.any)) {
    const tests = node.any.map(child => compileRule(child, specs, used, windows))
    return ctx => tests.some(test => test(ctx))
  }
  if (node.not !== undefined) {
    const test = compileRule(node.not, specs, used, windows)
    return ctx => !test(ctx)
  }
  if (!isWindowLeaf(node)) return compileCondition(node as unknown as Condition)
  const spec = windowSpec(node, windows)
  const shared = specs.get(spec.key) ?? spec
  specs.set(shared.key, shared)
  used?.add(shared.key)
  return compare(shared, node.op as WindowOp, node.value as number)
}

function windowSpec (node: Record<string, unknown>, windows: string): WindowSpec {
  const withinMs = node.within === undefined ? null : parseWithin(node.within as string)
  let identity = JSON.stringify([node.fact, node.event, node.field ?? null, node.where ?? null, withinMs])
  if (windows !== '') identity += `\n${windows}`
  return {
    key: createHash('sha256').update(identity).digest('base64url').slice(0, 16),
    fact: node.fact as 'count' | 'sum',
    event: node.event as string,
    field: (node.field as string | undefined) ?? null,
    where: node.where === undefined ? null : compileCondition(node.where as Condition),
    withinMs,
    bucketMs: withinMs === null ? 0 : withinMs / BUCKETS_PER_WINDOW,
    countsFromMs: 0,
  }
}

function compare (spec: WindowSpec, op: WindowOp, value: number): SegmentTest {
  const read = (ctx: SegmentContext): number => windowValue(ctx.windows[spec.key], spec, ctx.nowMs)
  switch (op) {
    case 'eq': return ctx => read(ctx) === value
    case 'ne': return ctx => read(ctx) !== value
    case 'gt': return ctx => read(ctx) > value
    case 'gte': return ctx => read(ctx) >= value
    case 'lt': return ctx => read(ctx) < value
    case 'lte': return ctx => read(ctx) <= value
  }
}
