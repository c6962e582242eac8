// Compiled request validation. The fast check runs first; the error list is built only on failure,
// one entry per bad field, with the field as a JSON pointer.

import { Compile } from 'typebox/compile'
import type { Static, TSchema } from 'typebox'
import { ApiError, errorItem, type ErrorItem } from '../errors.js'

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
    throw ApiError.of(explain(compiled.Errors(body) as TypeBoxError[]), 'The request has invalid fields.')
  }
}

function explain (errors: TypeBoxError[]): ErrorItem[] {
  const byField = new Map<string, ErrorItem>()
  const add = (item: ErrorItem): void => {
    const key = item.field ?? ''
    const seen = byField.get(key)
    // A union reports one error per branch plus a summary; keep one entry per field, the summary.
    if (seen === undefined || item.message.endsWith('must be one of the accepted types.')) byField.set(key, item)
  }
  for (const error of errors) {
    const at = error.instancePath
    if (error.schemaPath.includes('/anyOf/')) {
      add(errorItem('invalid_field', at, `${label(at)} must be one of the accepted types.`))
      continue
    }
    switch (error.keyword) {
      case 'required':
        for (const name of error.params.requiredProperties as string[]) add(errorItem('invalid_field', `${at}/${name}`, `${name} is required.`))
        break
      case 'additionalProperties':
        for (const name of error.params.additionalProperties as string[]) add(errorItem('unknown_field', `${at}/${name}`, `${name} is not a field of this request.`))
        break
      case 'boolean':
        // `additionalProperties: false` reports once more per extra key; the entry above says it.
        break
      case 'propertyNames':
        break
      case 'pattern':
        add(errorItem('invalid_field', at, error.schemaPath.endsWith('propertyNames')
          ? `The name ${JSON.stringify(at.split('/').pop())} must be 1 to 128 characters of A-Z a-z 0-9 _ . : -`
          : `${label(at)} has the wrong format.`))
        break
      case 'anyOf':
        add(errorItem('invalid_field', at, `${label(at)} must be one of the accepted types.`))
        break
      default:
        add(errorItem('invalid_field', at, `${label(at)} ${error.message}.`))
    }
  }
  if (byField.size === 0) return [errorItem('invalid_field', undefined, 'The request does not match the schema.')]
  return [...byField.values()]
}

function label (pointer: string): string {
  return pointer === '' ? 'The body' : pointer.slice(1)
}

const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype'])

/**
 * Refuse prototype-polluting keys anywhere in a body. The walk only runs when the raw text mentions
 * one of them or has a \u escape (which could spell one), so ordinary requests pay a few indexOf
 * scans, not a traversal. The walk has no depth limit: it uses its own stack, and the body limit
 * bounds it.
 */
export function checkForbiddenKeys (text: string, body: unknown): void {
  if (!text.includes('__proto__') && !text.includes('constructor') && !text.includes('prototype') && !text.includes('\\u')) return
  const found = findForbidden(body)
  if (found !== null) throw new ApiError('forbidden_key', `The key "${found.split('/').pop()}" is refused.`, found)
}

interface Place { value: unknown, key: string, parent: Place | null }

function findForbidden (body: unknown): string | null {
  // Each place links to its parent, so deep nesting costs one small object per node, not a pointer string.
  const stack: Place[] = [{ value: body, key: '', parent: null }]
  for (let place = stack.pop(); place !== undefined; place = stack.pop()) {
    const value = place.value
    if (typeof value !== 'object' || value === null) continue
    for (const key of Object.keys(value)) {
      const child = { value: (value as Record<string, unknown>)[key], key, parent: place }
      if (FORBIDDEN_KEYS.has(key)) return pointerOf(child)
      stack.push(child)
    }
  }
  return null
}

function pointerOf (place: Place): string {
  const keys: string[] = []
  for (let at: Place | null = place; at !== null && at.parent !== null; at = at.parent) keys.push(at.key)
  return '/' + keys.reverse().join('/')
}
