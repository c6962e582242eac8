// What visitors and profiles share: attributes and segments, and how the API reads and changes them.

/** Attribute values as stored: a scalar or a list of strings. */
export type AttributeValue = string | number | boolean | string[]
export type Attributes = Record<string, AttributeValue>

export interface EntityState {
  attributes: Attributes
  segments: string[]
}

/** Segments per entity are bounded so one key can never grow without limit. */
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

/** Apply an update: `null` deletes, anything else replaces. */
export function applyAttributes (state: EntityState, update: Record<string, AttributeValue | null>): void {
  const attributes = state.attributes
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
  state.segments = [...current].slice(0, SEGMENTS_MAX)
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
