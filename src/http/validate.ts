// Prototype-polluting keys are refused in every request body, before any route reads it.

import { ApiError } from '../errors.js'

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
