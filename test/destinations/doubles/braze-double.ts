// Braze /users/track double: POST /users/track with `Authorization: Bearer <REST API key>`, checked as
// Braze documents it: attributes, events and purchases at most 75 each; every object identifies its
// user (external_id, user_alias {alias_name, alias_label}, braze_id, email or phone); events need name
// and time (ISO 8601); purchases need product_id, currency (ISO 4217), price and time. Objects that fail
// are listed in `errors` of a 201 answer, as Braze does; a bad key is 401.

import { HttpDouble, parseJson, type DoubleReply, type DoubleRequest } from './http-double.js'

export class BrazeDouble extends HttpDouble {
  readonly attributes: Array<Record<string, any>> = []
  readonly events: Array<Record<string, any>> = []
  readonly purchases: Array<Record<string, any>> = []
  validKeys = new Set(['braze-key'])

  constructor () {
    super(request => this.answer(request))
  }

  private answer (request: DoubleRequest): DoubleReply {
    if (request.method !== 'POST' || request.path !== '/users/track') return { status: 404, body: { message: 'not found' } }
    if (!this.validKeys.has(String(request.headers.authorization ?? '').replace(/^Bearer /, ''))) return { status: 401, body: { message: 'Invalid API key' } }
    const body = parseJson(request.body) as Record<string, unknown> | undefined
    if (body === undefined) return { status: 400, body: { message: 'Invalid JSON' } }
    const errors: Array<{ type: string, input_array: string, index: number }> = []
    for (const key of ['attributes', 'events', 'purchases']) {
      const list = body[key]
      if (list === undefined) continue
      if (!Array.isArray(list)) return { status: 400, body: { message: `${key} must be an array` } }
      if (list.length > 75) return { status: 400, body: { message: `Too many ${key}: at most 75 a request` } }
      for (const [index, object] of (list as Array<Record<string, any>>).entries()) {
        const problem = identified(object) ? problemOf(key, object) : 'no user identifier'
        if (problem !== null) errors.push({ type: problem, input_array: key, index })
        else (this as unknown as Record<string, unknown[]>)[key]!.push(object)
      }
    }
    return { status: 201, body: { message: 'success', ...(errors.length > 0 ? { errors } : {}) } }
  }
}

function identified (object: Record<string, any>): boolean {
  if (typeof object.external_id === 'string' || typeof object.braze_id === 'string' || typeof object.email === 'string' || typeof object.phone === 'string') return true
  return typeof object.user_alias?.alias_name === 'string' && typeof object.user_alias?.alias_label === 'string'
}

function problemOf (key: string, object: Record<string, any>): string | null {
  if (key === 'attributes') return null
  if (typeof object.time !== 'string' || Number.isNaN(Date.parse(object.time))) return 'time must be an ISO 8601 time'
  if (key === 'events') return typeof object.name === 'string' && object.name !== '' ? null : 'name is required'
  if (typeof object.product_id !== 'string' || object.product_id === '') return 'product_id is required'
  if (typeof object.currency !== 'string' || !/^[A-Z]{3}$/.test(object.currency)) return 'currency must be ISO 4217'
  return typeof object.price === 'number' ? null : 'price is required'
}
