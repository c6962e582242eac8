// Fact names: what a condition may ask about, and what kind of value each one yields.
// Validation and compilation read fact names through here, so they cannot disagree on what a name
// means (the reference interpreter in test/matching/ resolves them on its own, as an independent check).

import type { Op } from './types.js'

export const VISITOR_NUMBER_FACTS = [
  'pageViews', 'productViews', 'purchases', 'totalSpent', 'firstSeenSecondsAgo', 'lastSeenSecondsAgo',
] as const
export const VISITOR_LIST_FACTS = ['viewedSkus', 'purchasedSkus', 'viewedCategories'] as const
export const TIME_FACTS = ['hour', 'weekday'] as const

export type VisitorNumberFact = typeof VISITOR_NUMBER_FACTS[number]
export type VisitorListFact = typeof VISITOR_LIST_FACTS[number]
export type TimeFact = typeof TIME_FACTS[number]

export type FactRef =
  | { source: 'event', key: string }
  | { source: 'attribute', key: string }
  | { source: 'segment' }
  | { source: 'visitorNumber', key: VisitorNumberFact }
  | { source: 'visitorList', key: VisitorListFact }
  | { source: 'time', key: TimeFact }

// Field and attribute names follow the API's name rule (NAME_PATTERN in src/patterns.ts),
// so every attribute a profile can hold can be named in a rule: `attribute.loyalty.tier` is the
// attribute "loyalty.tier" (everything after the first dot). Names are looked up with a plain
// `obj[key]`, which is only safe because names that Object.prototype answers (constructor,
// toString, __proto__, ...) are refused here.
const FIELD_NAME = /^[A-Za-z0-9_.:-]{1,128}$/

export function isFieldName (name: string): boolean {
  return FIELD_NAME.test(name) && !(name in Object.prototype)
}

function oneOf<T extends string> (list: readonly T[], name: string): name is T {
  return (list as readonly string[]).includes(name)
}

/** `null` when the name is not a fact. */
export function parseFact (fact: string): FactRef | null {
  if (fact === 'segment') return { source: 'segment' }
  const dot = fact.indexOf('.')
  if (dot === -1) return null
  const head = fact.slice(0, dot)
  const key = fact.slice(dot + 1)
  if (head === 'event') return isFieldName(key) ? { source: 'event', key } : null
  if (head === 'attribute') return isFieldName(key) ? { source: 'attribute', key } : null
  if (head === 'visitor') {
    if (oneOf(VISITOR_NUMBER_FACTS, key)) return { source: 'visitorNumber', key }
    if (oneOf(VISITOR_LIST_FACTS, key)) return { source: 'visitorList', key }
    return null
  }
  if (head === 'time' && oneOf(TIME_FACTS, key)) return { source: 'time', key }
  return null
}

/**
 * What a fact can hold, which decides the ops and value types it accepts:
 * - any: event and attribute fields, whatever JSON the caller sent
 * - number: visitor counters and time; always present
 * - list: visitor string lists; always present
 * - set: the visitor's segments; only `contains` makes sense
 */
export type FactType = 'any' | 'number' | 'list' | 'set'

export function factType (ref: FactRef): FactType {
  switch (ref.source) {
    case 'event': case 'attribute': return 'any'
    case 'visitorNumber': case 'time': return 'number'
    case 'visitorList': return 'list'
    case 'segment': return 'set'
  }
}

const OPS_BY_TYPE: Record<FactType, readonly Op[]> = {
  any: ['eq', 'ne', 'in', 'nin', 'gt', 'gte', 'lt', 'lte', 'contains', 'startsWith', 'endsWith', 'glob', 'exists'],
  number: ['eq', 'ne', 'in', 'nin', 'gt', 'gte', 'lt', 'lte', 'exists'],
  list: ['contains', 'exists'],
  set: ['contains'],
}

export function opsFor (type: FactType): readonly Op[] {
  return OPS_BY_TYPE[type]
}
