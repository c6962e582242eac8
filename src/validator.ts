// Compiled validation of a request body or a configuration. The fast check runs first; the error list
// is built only on failure, one entry per bad field, with the field as a JSON pointer. In the base layer:
// the HTTP routes validate requests with it, and the webhook configuration its saved form.

import { Compile } from 'typebox/compile'
import type { Static, TSchema } from 'typebox'
import { ApiError, errorItem, type ErrorItem } from './errors.js'
import { NAME_PATTERN, UUID4_PATTERN, UUID_PATTERN } from './patterns.js'

export interface Validator<T> {
  (body: unknown): T
}

interface TypeBoxError {
  keyword: string
  schemaPath: string
  instancePath: string
  params: Record<string, unknown>
  message: string
}

/** Compile a schema into a function that returns the typed body or throws a 400 ApiError. */
export function validator<S extends TSchema> (schema: S): Validator<Static<S>> {
  const compiled = Compile(schema)
  return (body: unknown) => {
    if (compiled.Check(body)) return body as Static<S>
    throw ApiError.of(explain(schema, compiled.Errors(body) as TypeBoxError[]), 'The request has invalid fields.')
  }
}

/** Patterns whose meaning a person knows by name. */
const PATTERN_NAMES: ReadonlyMap<string, string> = new Map([
  [UUID4_PATTERN, 'a UUID v4 (like 2b7e1b8e-7c0e-4c7e-9a4e-1b2c3d4e5f60)'],
  [UUID_PATTERN, 'a UUID (like 6f1c2a4e-0b1d-4f7a-9c3e-2d5b8a1f0e47)'],
  [NAME_PATTERN, '1 to 128 characters of A-Z a-z 0-9 _ . : -'],
])

/**
 * One entry per bad field, saying what was expected: "visitorId: expected a UUID v4.", "path: expected
 * at most 2048 characters.". A union (a value of several accepted shapes) reports the constraint of the
 * shape the value has (a string too long), else every shape it may take.
 */
function explain (schema: TSchema, errors: readonly TypeBoxError[]): ErrorItem[] {
  const byField = new Map<string, ErrorItem>()
  const add = (item: ErrorItem): void => {
    if (!byField.has(item.field ?? '')) byField.set(item.field ?? '', item)
  }
  // Errors of union branches, held until their union's summary (or the end) says which to report.
  let branches: TypeBoxError[] = []
  const settle = (unionPath: string, at: string): void => {
    const mine = branches.filter(e => e.schemaPath.startsWith(unionPath + '/anyOf/') && e.instancePath.startsWith(at))
    branches = branches.filter(e => !mine.includes(e))
    const specific = mine.find(e => e.keyword !== 'type' && e.keyword !== 'const' && e.keyword !== 'anyOf')
    add((specific === undefined ? null : single(specific)) ?? errorItem('invalid_field', at, `${label(at)}: expected ${describe(resolve(schema, unionPath))}.`))
  }
  for (const error of errors) {
    if (error.keyword === 'anyOf') {
      settle(error.schemaPath, error.instancePath)
      continue
    }
    if (error.schemaPath.includes('/anyOf/')) {
      branches.push(error)
      continue
    }
    if (error.keyword === 'required') {
      for (const name of error.params.requiredProperties as string[]) add(errorItem('invalid_field', `${error.instancePath}/${name}`, `${name} is required.`))
    } else if (error.keyword === 'additionalProperties') {
      // Only a closed object has unknown fields; in an open one (custom event fields) the value is what is wrong.
      if ((resolve(schema, error.schemaPath) as { additionalProperties?: unknown } | undefined)?.additionalProperties !== false) continue
      for (const name of error.params.additionalProperties as string[]) add(errorItem('unknown_field', `${error.instancePath}/${name}`, `${name} is not a field of this request.`))
    } else {
      const item = single(error)
      if (item !== null) add(item)
    }
  }
  // Branch errors whose summary did not come (the error list is bounded): one union per field.
  while (branches.length > 0) {
    const first = branches[0]!
    settle(first.schemaPath.slice(0, first.schemaPath.indexOf('/anyOf/')), first.instancePath)
  }
  if (byField.size === 0) return [errorItem('invalid_field', undefined, 'The request does not match the schema.')]
  return [...byField.values()]
}

/** The entry for one error of one keyword, or null for the ones another entry already says. */
function single (error: TypeBoxError): ErrorItem | null {
  const at = error.instancePath
  const limit = error.params.limit as number
  let expected: string
  switch (error.keyword) {
    // `additionalProperties: false` reports once more per extra key; the unknown_field entry says it.
    case 'boolean': return null
    case 'propertyNames': return null
    case 'pattern':
      if (error.schemaPath.endsWith('propertyNames')) {
        return errorItem('invalid_field', at, `The name ${JSON.stringify(at.split('/').pop())} must be 1 to 128 characters of A-Z a-z 0-9 _ . : -`)
      }
      expected = PATTERN_NAMES.get(error.params.pattern as string) ?? 'another format'
      break
    case 'maxLength': expected = `at most ${limit} characters`; break
    case 'minLength': expected = limit === 1 ? 'at least 1 character' : `at least ${limit} characters`; break
    case 'maximum': expected = `a number at most ${limit}`; break
    case 'minimum': expected = `a number at least ${limit}`; break
    case 'exclusiveMaximum': expected = `a number below ${limit}`; break
    case 'exclusiveMinimum': expected = `a number above ${limit}`; break
    case 'maxItems': expected = `at most ${limit} items`; break
    case 'minItems': expected = limit === 1 ? 'at least 1 item' : `at least ${limit} items`; break
    case 'maxProperties': expected = `at most ${limit} fields`; break
    case 'minProperties': expected = limit === 1 ? 'at least 1 field' : `at least ${limit} fields`; break
    case 'type': expected = TYPE_NAMES[error.params.type as string] ?? `a ${String(error.params.type)}`; break
    case 'const': expected = JSON.stringify(error.params.allowedValue); break
    default: return errorItem('invalid_field', at, `${label(at)} ${error.message}.`)
  }
  return errorItem('invalid_field', at, `${label(at)}: expected ${expected}.`)
}

const TYPE_NAMES: Record<string, string> = {
  string: 'a string', number: 'a number', integer: 'a whole number', boolean: 'true or false',
  null: 'null', array: 'a list', object: 'an object',
}

/** What a schema accepts, in words: "a string, a number, true or false, null or a list of strings". */
function describe (schema: TSchema | undefined): string {
  const node = schema as Record<string, unknown> | undefined
  if (node === undefined) return 'another type'
  if (Array.isArray(node.anyOf)) {
    const parts = [...new Set((node.anyOf as TSchema[]).map(describe))]
    return parts.length === 1 ? parts[0]! : `${parts.slice(0, -1).join(', ')} or ${parts[parts.length - 1]}`
  }
  if (Object.hasOwn(node, 'const')) return JSON.stringify(node.const)
  if (node.type === 'array') return node.items === undefined ? 'a list' : `a list of ${plural(describe(node.items as TSchema))}`
  return TYPE_NAMES[node.type as string] ?? 'another type'
}

function plural (phrase: string): string {
  return phrase.startsWith('a ') ? phrase.slice(2) + 's' : phrase
}

/** The sub-schema at a TypeBox schema path ("#/properties/device"). */
function resolve (schema: TSchema, path: string): TSchema | undefined {
  let node: unknown = schema
  for (const key of path.split('/').slice(1)) {
    if (typeof node !== 'object' || node === null) return undefined
    node = (node as Record<string, unknown>)[key.replace(/~1/g, '/').replace(/~0/g, '~')]
  }
  return node as TSchema | undefined
}

function label (pointer: string): string {
  return pointer === '' ? 'The body' : pointer.slice(1)
}
