// The OpenAPI 3.1 document, generated from the route definitions the router serves (src/http/route.ts):
// each route's `doc` gives its summary, tag, request body (the TypeBox schemas that validate requests,
// from src/http/schemas.ts and the webhook config; descriptive ones from src/http/reply-schemas.ts
// where hand-written code validates), the success answer and the refusals it adds. Who may call it
// follows from the route (an /admin route's role, a token endpoint's access), and the refusals every
// operation shares from that and its body. Error responses are generated per status from
// src/errors.ts, so a code's status and message are stated in one place. Built once, at start.

import Type, { type TSchema } from 'typebox'
import { ERRORS, type ErrorCode } from '../errors.js'
import { assert } from '../assert.js'
import { TAGS, type RouteDefinition, type RouteDoc } from '../http/route.js'
import type { RouteRole } from '../http/server.js'
import * as R from '../http/reply-schemas.js'
import { VERSION } from '../package-root.js'

type Auth = 'admin' | 'token-read' | 'token-write' | 'none'

// Refusals every operation may answer, and those that follow from a body or from authentication.
const ALWAYS: ErrorCode[] = ['overloaded', 'shutting_down', 'internal']
const BODY: ErrorCode[] = ['invalid_json', 'invalid_field', 'unknown_field', 'forbidden_key', 'body_too_large', 'unsupported_media_type', 'bad_framing']
const RAW_BODY: ErrorCode[] = ['body_too_large', 'bad_framing']
/** With a panel session instead of the admin key: outside the role or the account, or a change without the Origin. */
const SESSION: ErrorCode[] = ['role_forbidden', 'csrf_refused']
const AUTH: Record<Auth, ErrorCode[]> = {
  admin: ['admin_unauthorized'],
  'token-read': ['token_missing', 'token_invalid', 'token_wrong_account', 'token_write_only', 'rate_limited'],
  'token-write': ['token_missing', 'token_invalid', 'token_wrong_account', 'token_read_only', 'rate_limited'],
  none: [],
}

/** One documented operation: where it is, who may call it, what it says of itself. */
interface Operation {
  method: string
  path: string
  auth: Auth
  role: RouteRole | undefined
  doc: RouteDoc
}

/** The OpenAPI method and path of a route: `GET /admin/accounts/{account}` for get + `/admin/accounts/:account`. */
export function operationKey (method: string, pattern: string): string {
  const verb = method === 'del' ? 'DELETE' : method.toUpperCase()
  return `${verb} ${pattern.replace(/:([A-Za-z]+)/g, '{$1}')}`
}

function operationOf (route: RouteDefinition, doc: RouteDoc): Operation {
  const [method, path] = operationKey(route.method, route.pattern).split(' ') as [string, string]
  // The document and the router must agree on what a request carries.
  assert(doc.body === undefined ? route.body === false : (doc.body.raw === undefined ? route.body === true : route.body === 'raw' || route.body === 'stream'), 'a documented body matches the route\'s', { route: `${method} ${path}` })
  const admin = route.pattern.startsWith('/admin') && route.role !== 'public'
  assert(!(admin && doc.token !== undefined), 'an admin route takes no token', { route: `${method} ${path}` })
  const auth: Auth = admin ? 'admin' : doc.token === 'read' ? 'token-read' : doc.token === 'write' ? 'token-write' : 'none'
  return { method, path, auth, role: route.role, doc }
}

export function buildOpenApi (routes: readonly RouteDefinition[]): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {}
  for (const route of routes) {
    if (route.doc === null) continue
    const operation = operationOf(route, route.doc)
    paths[operation.path] ??= {}
    assert(paths[operation.path]![operation.method.toLowerCase()] === undefined, 'one route per method and path', { route: `${operation.method} ${operation.path}` })
    paths[operation.path]![operation.method.toLowerCase()] = operationObject(operation)
  }
  const doc = {
    openapi: '3.1.0',
    info: {
      title: 'Beacon',
      version: VERSION,
      summary: 'Audience and personalization engine: visitor events in, eligible campaigns out, webhooks to everything else.',
      description: 'Public endpoints take a JSON body (POST, Content-Type: application/json); those that read or write ' +
        'attributes and segments authenticate with a `token` field in the body. The admin API takes ' +
        '`Authorization: Bearer <admin key>`. Every refusal has the body `{status, message, errors: [{code, field?, message}]}`; ' +
        'switch on `code`. docs/api.md is the guide.',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    tags: Object.entries(TAGS).map(([name, description]) => ({ name, description })),
    paths,
    components: {
      securitySchemes: {
        adminKey: { type: 'http', scheme: 'bearer', description: 'The admin key: BEACON_ADMIN_KEY, or generated into <data dir>/admin.key on first start.' },
        session: {
          type: 'apiKey', in: 'cookie', name: 'beacon_session',
          description: 'A panel session (POST /admin/session): only the user\'s own account, within their role; changes need the Origin header of the site itself.',
        },
      },
      schemas: { Condition: R.Condition, SegmentCondition: R.SegmentCondition },
    },
  }
  // TypeBox schemas are JSON Schema plus non-enumerable bookkeeping: a JSON round trip keeps the schema.
  return JSON.parse(JSON.stringify(doc)) as Record<string, unknown>
}

function operationObject ({ method, path, auth, role, doc }: Operation): Record<string, unknown> {
  const out: Record<string, unknown> = {
    operationId: operationId(method, path),
    summary: doc.summary,
    tags: [doc.tag],
    security: auth === 'admin' ? [{ adminKey: [] }, { session: [] }] : [],
  }
  const description = [roleNote(auth, role), doc.description, authNote(auth)].filter(Boolean).join(' ')
  if (description !== '') out.description = description
  const parameters = [
    ...[...path.matchAll(/\{([A-Za-z]+)\}/g)].map(([, name]) => ({ name, in: 'path', required: true, description: paramDescription(path, name!), schema: { type: 'string' } })),
    ...(doc.query ?? []).map(q => ({ name: q.name, in: 'query', required: false, description: q.description, schema: q.schema })),
    ...(doc.headers ?? []).map(h => ({ name: h.name, in: 'header', required: false, description: h.description, schema: h.schema })),
  ]
  if (parameters.length > 0) out.parameters = parameters
  if (doc.body?.raw !== undefined) {
    out.requestBody = { required: true, content: { [doc.body.raw]: { schema: doc.body.schema } } }
  } else if (doc.body !== undefined) {
    out.requestBody = { required: true, content: { 'application/json': { schema: doc.body.schema, example: doc.body.example } } }
  }
  out.responses = responses(auth, doc)
  return out
}

function responses (auth: Auth, doc: RouteDoc): Record<string, unknown> {
  const body = doc.body === undefined ? [] : doc.body.raw === undefined ? BODY : RAW_BODY
  const session = auth === 'admin' ? SESSION : []
  const codes = new Set<ErrorCode>([...doc.errors, ...AUTH[auth], ...session, ...body, ...ALWAYS])
  const byStatus = new Map<number, ErrorCode[]>()
  for (const code of Object.keys(ERRORS) as ErrorCode[]) {
    if (!codes.has(code)) continue
    const status = ERRORS[code][0]
    byStatus.set(status, [...(byStatus.get(status) ?? []), code])
  }
  const out: Record<string, { description: string, content?: Record<string, { schema: TSchema }> }> = {}
  for (const answer of [doc.ok, ...(doc.also ?? [])]) {
    out[String(answer.status)] = answer.schema === undefined || answer.contentType === null
      ? { description: answer.description } as typeof out[string]
      : { description: answer.description, content: { [answer.contentType ?? 'application/json']: { schema: answer.schema } } }
  }
  for (const [status, list] of [...byStatus].sort(([a], [b]) => a - b)) {
    const error = ErrorBody(list)
    const existing = out[String(status)]
    if (existing === undefined) {
      out[String(status)] = { description: errorDescription(list), content: { 'application/json': { schema: error } } }
    } else {
      // A status that is both an answer and a refusal (/readyz's 503): either body.
      const content = existing.content!['application/json']!
      existing.description += ' Or refused: ' + errorDescription(list)
      content.schema = { anyOf: [content.schema, error] } as TSchema
    }
  }
  return out
}

/** The refusal body, with `code` narrowed to the given codes (one response per status lists its own). */
function ErrorBody (codes: readonly ErrorCode[]): TSchema {
  return Type.Object({
    status: Type.Integer({ description: 'The HTTP status.' }),
    message: Type.String({ description: 'For people; may change.' }),
    errors: Type.Array(Type.Object({
      code: codes.length === 1 ? Type.Literal(codes[0]!) : Type.Union(codes.map(code => Type.Literal(code))),
      field: Type.Optional(Type.String({ description: 'JSON pointer into the request body, e.g. /attributes/score.' })),
      message: Type.String(),
    }), { minItems: 1, description: 'One entry per problem; switch on `code`.' }),
  })
}

/** A response description naming each code of the status and its default message. */
function errorDescription (codes: readonly ErrorCode[]): string {
  return codes.map(code => `\`${code}\`: ${ERRORS[code][1]}`).join(' ')
}

/** Who may call an admin operation with a panel session (the admin key may call every one). */
function roleNote (auth: Auth, role: RouteRole | undefined): string {
  if (auth !== 'admin') return ''
  const need = role ?? 'owner'
  return need === 'admin' ? 'Role: the admin key only.' : `Role: ${need}.`
}

function authNote (auth: Auth): string {
  switch (auth) {
    case 'token-read': return 'Authentication: a token with read access in the body\'s `token` field.'
    case 'token-write': return 'Authentication: a token with write access in the body\'s `token` field.'
    default: return ''
  }
}

const PARAMS: Record<string, string> = {
  account: 'The account id (UUID).',
  visitorId: 'The visitor id (UUID v4).',
  profileId: 'The profile id (e-mail, user id…), URL-encoded.',
}

/** Nouns of the collections a path parameter names a member of. */
const NOUNS: Record<string, string> = { tokens: 'token', 'event-types': 'event type', campaigns: 'campaign', segments: 'segment', webhooks: 'webhook' }

function paramDescription (path: string, name: string): string {
  if (PARAMS[name] !== undefined) return PARAMS[name]
  const segments = path.split('/')
  const collection = segments[segments.indexOf(`{${name}}`) - 1] ?? ''
  return `The ${NOUNS[collection] ?? collection}'s ${name} (1–128 characters of A-Z a-z 0-9 _ . : -).`
}

function operationId (method: string, path: string): string {
  const words = path.split('/').filter(Boolean).map(segment => {
    const param = /^\{(.+)\}$/.exec(segment)
    return param === null ? segment : `by-${param[1]}`
  })
  return method.toLowerCase() + words.join('-').split(/[-.]/).map(word => word.charAt(0).toUpperCase() + word.slice(1)).join('')
}
