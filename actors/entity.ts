// What visitors and profiles share: attributes and segments, and how the API reads and changes them.

import { ApiError } from '../src/errors.js'

/** Attribute values as stored: a scalar or a list of strings. */
export type AttributeValue = string | number | boolean | string[]
export type Attributes = Record<string, AttributeValue>

export interface EntityState {
  attributes: Attributes
  segments: string[]
}

/** Attributes and segments per entity are bounded so one key can never grow without limit. */
export const ATTRIBUTES_MAX = 2000
export const SEGMENTS_MAX = 1000

export type AttributeReply = Record<string, { value: string | number | boolean }[]>

/** A read: which attributes (null: all the token allows) and which segments (null: all). */
export interface EntityQuery {
  attributes: readonly string[] | null
  segments: readonly string[] | null
  allowed: (name: string) => boolean
}

export interface EntityView {
  attributes: AttributeReply
  segments: string[]
}

/** Answer a read from the state as it is now (a snapshot: later messages do not change it). */
export function queryEntity (state: EntityState, query: EntityQuery): EntityView {
  return {
    attributes: readAttributes(state.attributes, query.attributes, query.allowed),
    segments: readSegments(state.segments, query.segments),
  }
}

/** Apply an update: `null` deletes, anything else replaces. Refused whole if it would pass the cap. */
export function applyAttributes (state: EntityState, update: Record<string, AttributeValue | null>): void {
  const attributes = state.attributes
  let added = 0
  for (const name in update) if (update[name] !== null && !Object.hasOwn(attributes, name)) added++
  if (added > 0 && Object.keys(attributes).length + added > ATTRIBUTES_MAX) {
    throw new ApiError('entity_full', `This record would have more than ${ATTRIBUTES_MAX} attributes; delete some first.`, '/attributes')
  }
  for (const name in update) {
    const value = update[name]
    if (value === null || value === undefined) delete attributes[name]
    else attributes[name] = value
  }
}

/** Assign then remove (a name in both ends removed); returns the segments after the change. */
export function applySegments (state: EntityState, assign: readonly string[], remove: readonly string[]): string[] {
  const current = new Set(state.segments)
  for (const name of assign) current.add(name)
  for (const name of remove) current.delete(name)
  if (current.size > SEGMENTS_MAX) throw new ApiError('entity_full', `This record would be in more than ${SEGMENTS_MAX} segments.`, '/assignees')
  state.segments = [...current]
  return state.segments
}

/** The seed's query shape: each attribute as an array of `{value}`; only the names asked for. */
export function readAttributes (attributes: Attributes, names: readonly string[] | null, allowed: (name: string) => boolean): AttributeReply {
  const out: AttributeReply = {}
  if (names === null) {
    for (const name in attributes) if (allowed(name)) out[name] = asValues(attributes[name]!)
    return out
  }
  for (const name of names) if (Object.hasOwn(attributes, name)) out[name] = asValues(attributes[name]!)
  return out
}

export function readSegments (segments: readonly string[], names: readonly string[] | null): string[] {
  if (names === null) return segments.slice()
  return names.filter(name => segments.includes(name))
}

function asValues (value: AttributeValue): { value: string | number | boolean }[] {
  return Array.isArray(value) ? value.map(v => ({ value: v })) : [{ value }]
}
