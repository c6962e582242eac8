// The bad-input corpus as data: each case is a malformed request (method, path, body or raw bytes,
// headers, how the body is streamed) and what Beacon must answer (status, stable error code, field,
// Allow or another header). test/http/bad-input.test.ts sends every case over real HTTP to one seeded
// process; test/http/transport.test.ts breaks the framing itself below this table.

import type { ErrorCode } from '../../src/errors.js'
import { ADMIN_KEY } from '../helpers/beacon.js'

// ---------------------------------------------------------------------------------------------------
// What the cases run against (filled in by the before hook)

export interface Ctx {
  url: string
  port: number
  account: string
  /** read-write, every attribute */
  token: string
  other: string
  otherToken: string
  otherTokenId: string
  suspended: string
  suspendedToken: string
  /** read only, attribute "color" */
  readToken: string
  /** write only, attribute "color" */
  writeToken: string
  /** read-write, attribute "color" only */
  colorToken: string
  /** read-write, attribute "color", 1 request per second */
  ratedToken: string
  revokedToken: string
  visitorId: string
  profileId: string
}

/** What a valid body is made of: the seeded account, its read-write token, visitor and profile. */
export type Seed = Pick<Ctx, 'account' | 'token' | 'visitorId' | 'profileId'>

export const UNKNOWN_ACCOUNT = '00000000-0000-4000-8000-000000000000'
export const MAX_BODY = 65536

export type Ep = 'event' | 'pq' | 'pa' | 'ps' | 'vq' | 'va' | 'vs'
export const EPS: Ep[] = ['event', 'pq', 'pa', 'ps', 'vq', 'va', 'vs']
export const PATH: Record<Ep, string> = {
  event: '/campaigns/query',
  pq: '/profiles/query',
  pa: '/profiles/attributes',
  ps: '/profiles/segments',
  vq: '/visitors/query',
  va: '/visitors/attributes',
  vs: '/visitors/segments',
}
const TOKEN_EPS: Ep[] = ['pq', 'pa', 'ps', 'vq', 'va', 'vs']
const READ_EPS: Ep[] = ['pq', 'vq']
const WRITE_EPS: Ep[] = ['pa', 'ps', 'va', 'vs']
const VISITOR_EPS: Ep[] = ['event', 'vq', 'va', 'vs']

type Body = Record<string, unknown>

/** A valid body for each endpoint, aimed at the seeded visitor/profile: every case breaks one thing. */
export const BASE: Record<Ep, (c: Seed) => Body> = {
  event: c => ({ account: c.account, visitorId: c.visitorId, platform: 'web', event: 'pageView' }),
  pq: c => ({ account: c.account, token: c.token, profileId: c.profileId }),
  pa: c => ({ account: c.account, token: c.token, profileId: c.profileId, attributes: { color: 'green' } }),
  ps: c => ({ account: c.account, token: c.token, profileId: c.profileId, assignees: ['seg-new'], removes: ['seg-p'] }),
  vq: c => ({ account: c.account, token: c.token, visitorId: c.visitorId }),
  va: c => ({ account: c.account, token: c.token, visitorId: c.visitorId, attributes: { color: 'green' } }),
  vs: c => ({ account: c.account, token: c.token, visitorId: c.visitorId, assignees: ['seg-new'], removes: ['seg-a'] }),
}
export const baseText = (ep: Ep, c: Seed): string => JSON.stringify(BASE[ep](c))
/** Put a raw `"key": value` pair (text as sent) first in a JSON object's text. */
const prepend = (objectText: string, pair: string): string => '{' + pair + ',' + objectText.slice(1)
/** The base body with one field replaced by raw text (first in the object, no duplicate key left). */
const rawWith = (ep: Ep, c: Ctx, key: string, rawValue: string): string => {
  const b = BASE[ep](c)
  delete b[key]
  return prepend(JSON.stringify(b), `"${key}":${rawValue}`)
}
const nestObjects = (depth: number, inner: string): string => '{"a":'.repeat(depth) + inner + '}'.repeat(depth)
const nestArrays = (depth: number, inner: string): string => '['.repeat(depth) + inner + ']'.repeat(depth)
const names = (n: number, prefix = 'n'): string[] => Array.from({ length: n }, (_, i) => `${prefix}${i}`)
export const tokenId = (token: string): string => token.slice(3, token.indexOf('_', 3))

// ---------------------------------------------------------------------------------------------------
// The case table

export interface Case {
  /** What is wrong with the request. */
  what: string
  method: string
  /** May hold {account}, {other}, {unknown}, {otherTokenId}. */
  path: string
  /** A JSON body, serialized as is. */
  body?: (c: Ctx) => unknown
  /** A body sent byte for byte. */
  raw?: (c: Ctx) => string | Uint8Array
  /** Default application/json when there is a body; null: no Content-Type header at all. */
  contentType?: string | null
  /** Default: the admin key on /admin paths, nothing elsewhere; null: no Authorization header. */
  auth?: string | null
  /** chunked: a streamed body with no Content-Length (stalled: the stream pauses after the limit). */
  transport?: 'chunked-stalled' | 'chunked-nonstop'
  status: number
  code?: ErrorCode
  field?: string
  allow?: string
  header?: string
}

export const cases: Case[] = []

function bad (ep: Ep, what: string, mutate: (b: Body, c: Ctx) => void, status: number, code: ErrorCode, field?: string): void {
  cases.push({
    what,
    method: 'POST',
    path: PATH[ep],
    body: c => { const b = BASE[ep](c); mutate(b, c); return b },
    status,
    code,
    ...(field === undefined ? {} : { field }),
  })
}

function rawBad (ep: Ep, what: string, raw: (c: Ctx) => string | Uint8Array, status: number, code: ErrorCode, extra: Partial<Case> = {}): void {
  cases.push({ what, method: 'POST', path: PATH[ep], raw, status, code, ...extra })
}

// 1. Bad JSON, on every endpoint ---------------------------------------------------------------------

const BAD_JSON: [string, (ep: Ep, c: Ctx) => string][] = [
  ['truncated JSON', (ep, c) => baseText(ep, c).slice(0, -7)],
  ['JSON cut after a key', () => '{"account":'],
  ['trailing garbage after the object', (ep, c) => baseText(ep, c) + ' x'],
  ['two objects back to back', (ep, c) => baseText(ep, c) + baseText(ep, c)],
  ['a trailing comma', (ep, c) => baseText(ep, c).slice(0, -1) + ',}'],
  ['single-quoted strings', (ep, c) => baseText(ep, c).replaceAll('"', "'")],
  ['unquoted keys', (ep, c) => baseText(ep, c).replace(/"([A-Za-z]+)":/g, '$1:')],
  ['a NaN literal', (ep, c) => prepend(baseText(ep, c), '"price":NaN')],
  ['an Infinity literal', (ep, c) => prepend(baseText(ep, c), '"price":Infinity')],
  ['an undefined literal', (ep, c) => prepend(baseText(ep, c), '"x":undefined')],
  ['a hex number', (ep, c) => prepend(baseText(ep, c), '"price":0x10')],
  ['a number with a leading zero', (ep, c) => prepend(baseText(ep, c), '"price":012')],
  ['a /* comment */', (ep, c) => '/* hi */' + baseText(ep, c)],
  ['a raw newline inside a string', (ep, c) => prepend(baseText(ep, c), '"x":"a\nb"')],
  ['an invalid escape \\x41', (ep, c) => prepend(baseText(ep, c), '"x":"\\x41"')],
  ['an empty body', () => ''],
  ['a whitespace-only body', () => ' \r\n\t '],
  ['a BOM-only body', () => '\uFEFF'],
  ['a top-level empty array', () => '[]'],
  ['a top-level array around a valid object', (ep, c) => '[' + baseText(ep, c) + ']'],
  ['a top-level string', () => '"hello"'],
  ['a top-level number', () => '42'],
  ['a top-level null', () => 'null'],
  ['a top-level true', () => 'true'],
  ['10,000 nested arrays as the top level', () => nestArrays(10_000, '1')],
]
for (const ep of EPS) {
  for (const [what, raw] of BAD_JSON) rawBad(ep, what, c => raw(ep, c), 400, 'invalid_json')
}
// Invalid UTF-8 is not JSON text (RFC 8259 §8.1); it must not be silently replaced by U+FFFD.
rawBad('event', 'an invalid UTF-8 byte (0xFF) inside a string', c => {
  const text = JSON.stringify({ ...BASE.event(c), platform: 'w#b' })
  const at = text.indexOf('#')
  return Buffer.concat([Buffer.from(text.slice(0, at)), Buffer.from([0xff]), Buffer.from(text.slice(at + 1))])
}, 400, 'invalid_json')
rawBad('pq', 'a truncated UTF-8 sequence (0xE2 0x82) inside a string', c => {
  const text = baseText('pq', c).replace(c.profileId, '#')
  const at = text.indexOf('#')
  return Buffer.concat([Buffer.from(text.slice(0, at)), Buffer.from([0xe2, 0x82]), Buffer.from(text.slice(at + 1))])
}, 400, 'invalid_json')

// 2. Wrong content types, on every endpoint (the body itself is valid JSON unless a form is claimed) --

const CONTENT_TYPES: [string, string | null, ((ep: Ep, c: Ctx) => string) | null][] = [
  ['no Content-Type', null, null],
  ['text/plain', 'text/plain', null],
  ['text/plain; charset=utf-8', 'text/plain; charset=utf-8', null],
  ['application/x-www-form-urlencoded', 'application/x-www-form-urlencoded', (ep, c) => new URLSearchParams(BASE[ep](c) as Record<string, string>).toString()],
  ['multipart/form-data', 'multipart/form-data; boundary=XyZ', (ep, c) => `--XyZ\r\nContent-Disposition: form-data; name="body"\r\n\r\n${baseText(ep, c)}\r\n--XyZ--\r\n`],
  ['application/jsonp', 'application/jsonp', null],
  ['text/json', 'text/json', null],
  ['application/vnd.api+json', 'application/vnd.api+json', null],
  ['application/json-patch+json', 'application/json-patch+json', null],
  ['a bare "json"', 'json', null],
  ['a list "application/json, text/plain"', 'application/json, text/plain', null],
]
for (const ep of EPS) {
  for (const [what, type, raw] of CONTENT_TYPES) {
    rawBad(ep, `Content-Type ${what}`, c => raw === null ? baseText(ep, c) : raw(ep, c), 415, 'unsupported_media_type', { contentType: type })
  }
}

// 3. Oversized bodies ---------------------------------------------------------------------------------

export const padded = (ep: Ep, c: Seed, bytes: number): string => {
  const text = baseText(ep, c)
  return text + ' '.repeat(bytes - Buffer.byteLength(text))
}
for (const ep of EPS) {
  rawBad(ep, 'a 70,000-byte body with Content-Length', c => padded(ep, c, 70_000), 413, 'body_too_large')
  cases.push({ what: 'a 66,000-byte chunked body (no Content-Length)', method: 'POST', path: PATH[ep], raw: c => padded(ep, c, 66_000), transport: 'chunked-stalled', status: 413, code: 'body_too_large' })
}
rawBad('event', 'a 1 MB body with Content-Length', c => padded('event', c, 1_000_000), 413, 'body_too_large')
rawBad('vq', 'a body of 65,537 bytes (one over the limit)', c => padded('vq', c, MAX_BODY + 1), 413, 'body_too_large')
rawBad('pq', 'a 70,000-byte body sent as text/plain (size is checked first)', c => padded('pq', c, 70_000), 413, 'body_too_large', { contentType: 'text/plain' })
rawBad('pq', 'a body of exactly 65,536 bytes with an empty profileId (not too large: the field is wrong)', c => {
  const text = JSON.stringify({ ...BASE.pq(c), profileId: '' })
  return text + ' '.repeat(MAX_BODY - Buffer.byteLength(text))
}, 400, 'invalid_field', { field: '/profileId' })
cases.push({ what: 'a 1 MB chunked body streamed without pause: the client must still read the 413', method: 'POST', path: PATH.va, raw: c => padded('va', c, 1_000_000), transport: 'chunked-nonstop', status: 413, code: 'body_too_large' })

// 4. Prototype keys ----------------------------------------------------------------------------------

for (const ep of EPS) {
  for (const [key, value] of [['__proto__', '{"polluted":true}'], ['constructor', '{"prototype":{"polluted":true}}'], ['prototype', '1']] as const) {
    rawBad(ep, `a top-level "${key}" key`, c => prepend(baseText(ep, c), `"${key}":${value}`), 400, 'forbidden_key', { field: `/${key}` })
  }
}
rawBad('event', '"__proto__" inside a custom event field', c => prepend(baseText('event', c), '"custom":{"__proto__":{"polluted":true}}'), 400, 'forbidden_key', { field: '/custom/__proto__' })
rawBad('event', '"constructor" inside an object in purchasedItems', c => prepend(baseText('event', c), '"purchasedItems":[{"constructor":1}]'), 400, 'forbidden_key', { field: '/purchasedItems/0/constructor' })
rawBad('event', '"__proto__" 50 levels deep in a custom field', c => prepend(baseText('event', c), '"custom":' + nestObjects(49, '{"__proto__":1}')), 400, 'forbidden_key')
rawBad('event', '"__proto__" 10,000 levels deep in a custom field', c => prepend(baseText('event', c), '"custom":' + nestObjects(9_999, '{"__proto__":1}')), 400, 'forbidden_key')
for (const ep of ['pa', 'va'] as const) {
  for (const key of ['__proto__', 'constructor', 'prototype']) {
    rawBad(ep, `an attribute named "${key}"`, c => baseText(ep, c).replace('"attributes":{', `"attributes":{"${key}":["a","b"],`), 400, 'forbidden_key', { field: `/attributes/${key}` })
  }
  rawBad(ep, '"__proto__" nested inside an attribute value', c => baseText(ep, c).replace('"attributes":{', '"attributes":{"size":{"__proto__":{"x":1}},'), 400, 'forbidden_key', { field: '/attributes/size/__proto__' })
}
rawBad('va', '"constructor" 10,000 levels deep inside an attribute value', c => baseText('va', c).replace('"attributes":{', '"attributes":{"size":' + nestObjects(9_999, '{"constructor":1}') + ','), 400, 'forbidden_key')
for (const ep of READ_EPS) {
  rawBad(ep, '"__proto__" in an object inside the attributes list', c => prepend(baseText(ep, c), '"attributes":[{"__proto__":1}]'), 400, 'forbidden_key', { field: '/attributes/0/__proto__' })
  rawBad(ep, '"prototype" in an object inside the segments list', c => prepend(baseText(ep, c), '"segments":["ok",{"prototype":1}]'), 400, 'forbidden_key', { field: '/segments/1/prototype' })
}
for (const ep of ['ps', 'vs'] as const) {
  rawBad(ep, '"constructor" in an object inside assignees', c => rawWith(ep, c, 'assignees', '[{"constructor":1}]'), 400, 'forbidden_key', { field: '/assignees/0/constructor' })
}
// The same keys spelled with JSON escapes are the same keys once parsed.
rawBad('event', 'a top-level "__proto__" key spelled "\\u005f_proto__"', c => prepend(baseText('event', c), '"\\u005f_proto__":"x"'), 400, 'forbidden_key', { field: '/__proto__' })
rawBad('va', 'an attribute "__proto__" spelled "\\u005f_proto__" with a list value', c => baseText('va', c).replace('"attributes":{"color":"green"}', '"attributes":{"\\u005f_proto__":["a","b"]}'), 400, 'forbidden_key', { field: '/attributes/__proto__' })
rawBad('pa', 'an attribute "constructor" spelled "\\u0063onstructor"', c => baseText('pa', c).replace('"attributes":{"color":"green"}', '"attributes":{"\\u0063onstructor":"x"}'), 400, 'forbidden_key', { field: '/attributes/constructor' })
rawBad('vq', 'a top-level "prototype" key spelled "prototyp\\u0065"', c => prepend(baseText('vq', c), '"prototyp\\u0065":1'), 400, 'forbidden_key', { field: '/prototype' })

// 5. Missing required fields -------------------------------------------------------------------------

const REQUIRED: Record<Ep, string[]> = {
  event: ['account', 'visitorId', 'platform', 'event'],
  pq: ['account', 'profileId'],
  pa: ['account', 'profileId', 'attributes'],
  ps: ['account', 'profileId'],
  vq: ['account', 'visitorId'],
  va: ['account', 'visitorId', 'attributes'],
  vs: ['account', 'visitorId'],
}
for (const ep of EPS) {
  for (const name of REQUIRED[ep]) bad(ep, `missing ${name}`, b => { delete b[name] }, 400, 'invalid_field', `/${name}`)
  cases.push({ what: 'an empty object', method: 'POST', path: PATH[ep], body: () => ({}), status: 400, code: 'invalid_field' })
}
for (const ep of TOKEN_EPS) bad(ep, 'missing token', b => { delete b.token }, 401, 'token_missing', '/token')

// 6. Wrong types for every field ---------------------------------------------------------------------

type Kind = 'string' | 'nullable' | 'number' | 'names' | 'map'
const FIELDS: Record<Ep, Record<string, Kind>> = {
  event: {
    account: 'string', visitorId: 'string', profileId: 'string', token: 'string', platform: 'string', device: 'string', event: 'string',
    path: 'string', referrer: 'nullable', sku: 'string', price: 'number', brand: 'string', breadcrumb: 'string', category: 'string',
    orderId: 'string', orderTotal: 'number', purchasedItems: 'names',
  },
  pq: { account: 'string', token: 'string', profileId: 'string', attributes: 'names', segments: 'names' },
  pa: { account: 'string', token: 'string', profileId: 'string', attributes: 'map' },
  ps: { account: 'string', token: 'string', profileId: 'string', assignees: 'names', removes: 'names' },
  vq: { account: 'string', token: 'string', visitorId: 'string', attributes: 'names', segments: 'names' },
  va: { account: 'string', token: 'string', visitorId: 'string', attributes: 'map' },
  vs: { account: 'string', token: 'string', visitorId: 'string', assignees: 'names', removes: 'names' },
}
/** [label, value, where the error points below the field] */
const WRONG: Record<Kind, [string, unknown, string][]> = {
  string: [['a number', 1, ''], ['a boolean', true, ''], ['null', null, ''], ['an object', { a: 'b' }, ''], ['an array', ['x'], '']],
  nullable: [['a number', 1, ''], ['a boolean', false, ''], ['an object', { a: 'b' }, ''], ['an array', ['x'], '']],
  number: [['a numeric string', '12.50', ''], ['a boolean', true, ''], ['null', null, ''], ['an object', { v: 1 }, ''], ['an array', [1], '']],
  names: [['a string', 'color', ''], ['a number', 7, ''], ['an object', { color: true }, ''], ['null', null, ''], ['a list of numbers', [1, 2], '/0'], ['a list holding null', [null], '/0']],
  map: [['a string', 'color=red', ''], ['a number', 1, ''], ['an array', [['color', 'red']], ''], ['null', null, ''], ['a boolean', true, '']],
}
for (const ep of EPS) {
  for (const [name, kind] of Object.entries(FIELDS[ep])) {
    for (const [label, value, below] of WRONG[kind]) {
      bad(ep, `${name} is ${label}`, b => { b[name] = value }, 400, 'invalid_field', `/${name}${below}`)
    }
  }
}

// 7. Formats: accounts, visitor ids, names -----------------------------------------------------------

const BAD_ACCOUNTS: [string, string][] = [
  ['not a UUID', 'not-a-uuid'],
  ['the empty string', ''],
  ['a UUID without dashes', '0c6b1f3e5d7a4b2c9e8f1a2b3c4d5e6f'],
  ['a UUID in braces', '{0c6b1f3e-5d7a-4b2c-9e8f-1a2b3c4d5e6f}'],
  ['a UUID with a trailing newline', '0c6b1f3e-5d7a-4b2c-9e8f-1a2b3c4d5e6f\n'],
  ['a 60,000-character string', 'a'.repeat(60_000)],
]
for (const ep of EPS) {
  for (const [label, value] of BAD_ACCOUNTS) bad(ep, `account is ${label}`, b => { b.account = value }, 400, 'invalid_field', '/account')
}
const BAD_VISITOR_IDS: [string, string][] = [
  ['a v1 UUID', '6ba7b810-9dad-11d1-80b4-00c04fd430c8'],
  ['a v3 UUID', '6fa459ea-ee8a-3ca4-894e-db77e160355e'],
  ['a v5 UUID', '886313e1-3b8a-5372-9b90-0c9aee199e5d'],
  ['a v7 UUID', '01890a5d-ac96-774b-bcce-b302099a8057'],
  ['the nil UUID', '00000000-0000-0000-0000-000000000000'],
  ['a v4 UUID with variant nibble c', 'f47ac10b-58cc-4372-c567-0e02b2c3d479'],
  ['a v4 UUID in braces', '{f47ac10b-58cc-4372-a567-0e02b2c3d479}'],
  ['a urn:uuid: v4 UUID', 'urn:uuid:f47ac10b-58cc-4372-a567-0e02b2c3d479'],
  ['a v4 UUID with a trailing newline', 'f47ac10b-58cc-4372-a567-0e02b2c3d479\n'],
  ['a v4 UUID with a leading space', ' f47ac10b-58cc-4372-a567-0e02b2c3d479'],
  ['a v4 UUID without dashes', 'f47ac10b58cc4372a5670e02b2c3d479'],
  ['a v4-shaped id with a non-hex digit', 'g47ac10b-58cc-4372-a567-0e02b2c3d479'],
  ['35 characters', 'f47ac10b-58cc-4372-a567-0e02b2c3d47'],
  ['the empty string', ''],
]
for (const ep of VISITOR_EPS) {
  for (const [label, value] of BAD_VISITOR_IDS) bad(ep, `visitorId is ${label}`, b => { b.visitorId = value }, 400, 'invalid_field', '/visitorId')
}
const BAD_NAMES: [string, string][] = [
  ['a space', 'favourite color'],
  ['129 characters', 'a'.repeat(129)],
  ['the empty string', ''],
  ['a non-ASCII letter', 'größe'],
  ['a slash', 'a/b'],
  ['a leading space', ' color'],
  ['an emoji', '🎨'],
  ['a NUL character', 'a\u0000b'],
  ['a dollar sign', '$where'],
  ['a trailing newline', 'color\n'],
]
for (const [label, name] of BAD_NAMES) {
  for (const ep of ['pa', 'va'] as const) bad(ep, `an attribute name with ${label}`, b => { b.attributes = { [name]: 'x' } }, 400, 'invalid_field')
  for (const ep of READ_EPS) bad(ep, `a requested attribute name with ${label}`, b => { b.attributes = ['color', name] }, 400, 'invalid_field', '/attributes/1')
  for (const ep of ['ps', 'vs'] as const) bad(ep, `a segment name to assign with ${label}`, b => { b.assignees = [name] }, 400, 'invalid_field', '/assignees/0')
}
for (const [label, name] of BAD_NAMES.slice(0, 3)) {
  for (const ep of READ_EPS) bad(ep, `a segment name to check with ${label}`, b => { b.segments = [name] }, 400, 'invalid_field', '/segments/0')
  for (const ep of ['ps', 'vs'] as const) bad(ep, `a segment name to remove with ${label}`, b => { b.removes = [name] }, 400, 'invalid_field', '/removes/0')
  bad('event', `a custom field name with ${label}`, b => { b[name] = 'x' }, 400, 'invalid_field')
}

// 8. Huge strings (one over each maxLength) and too many items ---------------------------------------

const over = (n: number): string => 'x'.repeat(n + 1)
const TOO_LONG: [Ep, string, number][] = [
  ['event', 'profileId', 256], ['event', 'token', 256], ['event', 'platform', 64], ['event', 'path', 2048], ['event', 'referrer', 2048],
  ['event', 'sku', 256], ['event', 'brand', 256], ['event', 'breadcrumb', 2048], ['event', 'category', 256], ['event', 'orderId', 256],
  ['pq', 'profileId', 256], ['pq', 'token', 256], ['pa', 'profileId', 256], ['pa', 'token', 256], ['ps', 'profileId', 256], ['ps', 'token', 256],
  ['vq', 'token', 256], ['va', 'token', 256], ['vs', 'token', 256],
]
for (const [ep, name, max] of TOO_LONG) bad(ep, `${name} of ${max + 1} characters (limit ${max})`, b => { b[name] = over(max) }, 400, 'invalid_field', `/${name}`)
bad('event', 'event name of 129 characters', b => { b.event = over(128) }, 400, 'invalid_field', '/event')
bad('event', 'a custom field string of 2,049 characters', b => { b.note = over(2048) }, 400, 'invalid_field', '/note')
bad('event', 'a purchasedItems entry of 257 characters', b => { b.event = 'purchase'; b.orderId = 'o-1'; b.purchasedItems = [over(256)] }, 400, 'invalid_field', '/purchasedItems/0')
bad('event', '101 purchasedItems (limit 100)', b => { b.event = 'purchase'; b.orderId = 'o-1'; b.purchasedItems = names(101, 'sku-') }, 400, 'invalid_field', '/purchasedItems')
bad('event', 'a custom list field of 101 strings', b => { b.tags = names(101) }, 400, 'invalid_field', '/tags')
bad('event', '51 custom fields (limit 50)', b => { for (const n of names(51, 'custom')) b[n] = 1 }, 400, 'invalid_field')
bad('event', '64 custom fields (68 properties in all)', b => { for (const n of names(64, 'custom')) b[n] = 1 }, 400, 'invalid_field')
for (const ep of ['pa', 'va'] as const) {
  bad(ep, 'an attribute value of 4,097 characters', b => { b.attributes = { color: over(4096) } }, 400, 'invalid_field', '/attributes/color')
  bad(ep, 'a list attribute with an item of 4,097 characters', b => { b.attributes = { tags: ['ok', over(4096)] } }, 400, 'invalid_field')
  bad(ep, 'a list attribute of 101 items', b => { b.attributes = { tags: names(101) } }, 400, 'invalid_field', '/attributes/tags')
  bad(ep, '101 attributes (limit 100)', b => { b.attributes = Object.fromEntries(names(101, 'attr').map(n => [n, 'v'])) }, 400, 'invalid_field', '/attributes')
  bad(ep, 'an empty attributes object', b => { b.attributes = {} }, 400, 'invalid_field', '/attributes')
  bad(ep, 'an attribute value that is an object', b => { b.attributes = { color: { r: 1 } } }, 400, 'invalid_field', '/attributes/color')
  bad(ep, 'an attribute list of numbers', b => { b.attributes = { sizes: [1, 2] } }, 400, 'invalid_field')
  bad(ep, 'an attribute list of lists', b => { b.attributes = { sizes: [['a']] } }, 400, 'invalid_field')
  bad(ep, 'an unknown field "attribute"', b => { b.attribute = { color: 'x' } }, 400, 'unknown_field', '/attribute')
}
for (const ep of READ_EPS) {
  bad(ep, '101 requested attributes (limit 100)', b => { b.attributes = names(101) }, 400, 'invalid_field', '/attributes')
  bad(ep, '101 segments to check (limit 100)', b => { b.segments = names(101) }, 400, 'invalid_field', '/segments')
  bad(ep, 'an unknown field "fields"', b => { b.fields = ['color'] }, 400, 'unknown_field', '/fields')
}
for (const ep of ['ps', 'vs'] as const) {
  bad(ep, '101 segments to assign (limit 100)', b => { b.assignees = names(101) }, 400, 'invalid_field', '/assignees')
  bad(ep, '101 segments to remove (limit 100)', b => { b.removes = names(101) }, 400, 'invalid_field', '/removes')
  bad(ep, 'an unknown field "add"', b => { b.add = ['seg-x'] }, 400, 'unknown_field', '/add')
}
for (const ep of ['pq', 'pa', 'ps'] as const) bad(ep, 'an empty profileId', b => { b.profileId = '' }, 400, 'invalid_field', '/profileId')

// 9. Deep nesting (10,000 levels) --------------------------------------------------------------------

rawBad('event', 'a custom field of 10,000 nested objects', c => prepend(baseText('event', c), '"custom":' + nestObjects(10_000, '1')), 400, 'invalid_field', { field: '/custom' })
rawBad('event', 'a custom field of 10,000 nested arrays', c => prepend(baseText('event', c), '"custom":' + nestArrays(10_000, '"x"')), 400, 'invalid_field')
rawBad('event', 'purchasedItems of 10,000 nested arrays', c => prepend(baseText('event', c), '"purchasedItems":' + nestArrays(10_000, '"x"')), 400, 'invalid_field')
rawBad('va', 'an attribute value of 10,000 nested objects', c => baseText('va', c).replace('"attributes":{', '"attributes":{"deep":' + nestObjects(10_000, '1') + ','), 400, 'invalid_field')
rawBad('pa', 'an attribute value of 10,000 nested arrays', c => baseText('pa', c).replace('"attributes":{', '"attributes":{"deep":' + nestArrays(10_000, '"x"') + ','), 400, 'invalid_field')
rawBad('pa', 'attributes itself 10,000 objects deep', c => baseText('pa', c).replace('"attributes":{"color":"green"}', '"attributes":' + nestObjects(10_000, '"x"')), 400, 'invalid_field')
rawBad('vq', 'the attributes list as 10,000 nested arrays', c => prepend(baseText('vq', c), '"attributes":' + nestArrays(10_000, '"color"')), 400, 'invalid_field')
rawBad('pq', 'an unknown field of 10,000 nested objects', c => prepend(baseText('pq', c), '"deep":' + nestObjects(10_000, 'null')), 400, 'unknown_field', { field: '/deep' })
rawBad('vs', 'assignees as 10,000 nested arrays', c => rawWith('vs', c, 'assignees', nestArrays(10_000, '"seg"')), 400, 'invalid_field')
rawBad('ps', 'removes as 10,000 nested objects', c => rawWith('ps', c, 'removes', nestObjects(10_000, '"seg"')), 400, 'invalid_field')

// 10. Event kinds --------------------------------------------------------------------------------------

bad('event', 'an event type never defined', b => { b.event = 'signupX' }, 400, 'unknown_event_type', '/event')
bad('event', 'an event type defined only for another account', b => { b.event = 'otherOnly' }, 400, 'unknown_event_type', '/event')
bad('event', 'an event name with a space', b => { b.event = 'page view' }, 400, 'invalid_field', '/event')
bad('event', 'an empty event name', b => { b.event = '' }, 400, 'invalid_field', '/event')
bad('event', 'an empty platform', b => { b.platform = '' }, 400, 'invalid_field', '/platform')
bad('event', 'device "tv" (not desktop, tablet, mobile)', b => { b.device = 'tv' }, 400, 'invalid_field', '/device')
bad('event', 'device "Desktop" (wrong case)', b => { b.device = 'Desktop' }, 400, 'invalid_field', '/device')
bad('event', 'productView without sku', b => { b.event = 'productView' }, 400, 'invalid_field', '/sku')
bad('event', 'productView with sku null', b => { b.event = 'productView'; b.sku = null }, 400, 'invalid_field', '/sku')
bad('event', 'productView with an empty sku', b => { b.event = 'productView'; b.sku = '' }, 400, 'invalid_field', '/sku')
bad('event', 'productView with price as a string', b => { b.event = 'productView'; b.sku = 'SKU-1'; b.price = '19,90' }, 400, 'invalid_field', '/price')
bad('event', 'purchase without orderId', b => { b.event = 'purchase'; b.orderTotal = 10 }, 400, 'invalid_field', '/orderId')
bad('event', 'purchase with orderId null', b => { b.event = 'purchase'; b.orderId = null }, 400, 'invalid_field', '/orderId')
bad('event', 'purchase with an empty orderId', b => { b.event = 'purchase'; b.orderId = '' }, 400, 'invalid_field', '/orderId')
bad('event', 'purchase with purchasedItems as one string', b => { b.event = 'purchase'; b.orderId = 'o-1'; b.purchasedItems = 'SKU-1,SKU-2' }, 400, 'invalid_field', '/purchasedItems')
bad('event', 'a custom event (signup) without its required field plan', b => { b.event = 'signup' }, 400, 'invalid_field', '/plan')
bad('event', 'a custom event (signup) with plan null', b => { b.event = 'signup'; b.plan = null }, 400, 'invalid_field', '/plan')
bad('event', 'a custom event whose required fields (toString, valueOf) are missing', b => { b.event = 'inherit' }, 400, 'invalid_field', '/toString')
bad('event', 'a custom field that is an object', b => { b.custom = { a: 1 } }, 400, 'invalid_field', '/custom')

// 11. Tokens and the order of checks -----------------------------------------------------------------

const flipLast = (token: string): string => token.slice(0, -1) + (token.endsWith('A') ? 'B' : 'A')
for (const ep of TOKEN_EPS) {
  bad(ep, 'a garbage token', b => { b.token = 'not-a-token' }, 401, 'token_invalid', '/token')
  bad(ep, 'a token of the right shape that was never issued', b => { b.token = 'bk_0123456789abcdef_c2VjcmV0c2VjcmV0c2VjcmV0' }, 401, 'token_invalid', '/token')
  bad(ep, 'a real token with its last character changed', (b, c) => { b.token = flipLast(c.token) }, 401, 'token_invalid', '/token')
  bad(ep, 'a "bk_" token of 253 characters', b => { b.token = 'bk_' + 'a'.repeat(250) }, 401, 'token_invalid', '/token')
  bad(ep, 'a revoked token', (b, c) => { b.token = c.revokedToken }, 401, 'token_invalid', '/token')
  bad(ep, 'an empty token', b => { b.token = '' }, 400, 'invalid_field', '/token')
  bad(ep, "another account's token", (b, c) => { b.token = c.otherToken }, 403, 'token_wrong_account', '/token')
  bad(ep, 'an unknown account (before the token is looked at)', b => { b.account = UNKNOWN_ACCOUNT; b.token = 'garbage' }, 404, 'account_not_found')
  bad(ep, 'an unknown account and no token', b => { b.account = UNKNOWN_ACCOUNT; delete b.token }, 404, 'account_not_found')
  bad(ep, 'a suspended account with its own token', (b, c) => { b.account = c.suspended; b.token = c.suspendedToken }, 404, 'account_not_found')
}
for (const ep of READ_EPS) {
  bad(ep, 'a write-only token on a read', (b, c) => { b.token = c.writeToken }, 403, 'token_write_only', '/token')
  bad(ep, 'a token that does not allow the requested attribute', (b, c) => { b.token = c.colorToken; b.attributes = ['color', 'email'] }, 403, 'attribute_forbidden', '/attributes/email')
  bad(ep, "another account's token asking for a forbidden attribute (token before attribute)", (b, c) => { b.token = c.otherToken; b.attributes = ['email'] }, 403, 'token_wrong_account', '/token')
}
for (const ep of WRITE_EPS) bad(ep, 'a read-only token on a write', (b, c) => { b.token = c.readToken }, 403, 'token_read_only', '/token')
for (const ep of ['pa', 'va'] as const) {
  bad(ep, 'a token that does not allow the attribute written', (b, c) => { b.token = c.colorToken; b.attributes = { color: 'x', email: 'a@b.c' } }, 403, 'attribute_forbidden', '/attributes/email')
  bad(ep, 'a read-only token writing a forbidden attribute (token before attribute)', (b, c) => { b.token = c.readToken; b.attributes = { email: 'a@b.c' } }, 403, 'token_read_only', '/token')
}
bad('vq', 'an unknown account with an invalid visitorId (schema before account)', b => { b.account = UNKNOWN_ACCOUNT; b.visitorId = 'nope' }, 400, 'invalid_field', '/visitorId')
bad('pa', 'an unknown account with an empty attributes object (schema before account)', b => { b.account = UNKNOWN_ACCOUNT; b.attributes = {} }, 400, 'invalid_field', '/attributes')
bad('event', 'an unknown account', b => { b.account = UNKNOWN_ACCOUNT }, 404, 'account_not_found')
bad('event', 'a suspended account', (b, c) => { b.account = c.suspended }, 404, 'account_not_found')
bad('event', 'an unknown account and an unknown event type (account first)', b => { b.account = UNKNOWN_ACCOUNT; b.event = 'signupX' }, 404, 'account_not_found')
bad('event', 'an unknown account and no platform (schema first)', b => { b.account = UNKNOWN_ACCOUNT; delete b.platform }, 400, 'invalid_field', '/platform')
// A token allowing 1 request/s: the first request is refused for its attribute, the next for its rate.
bad('vq', 'a rate-limited token asking for a forbidden attribute (1st request)', (b, c) => { b.token = c.ratedToken; b.attributes = ['email'] }, 403, 'attribute_forbidden', '/attributes/email')
cases.push({
  what: 'a rate-limited token, 2nd request within the second (rate before attribute)',
  method: 'POST',
  path: PATH.vq,
  body: c => ({ ...BASE.vq(c), token: c.ratedToken, attributes: ['email'] }),
  status: 429,
  code: 'rate_limited',
  header: 'retry-after',
})

// 12. Unknown paths and wrong methods ------------------------------------------------------------------

const UNKNOWN_PATHS: [string, string][] = [
  ['POST', '/'], ['POST', '/campaigns'], ['POST', '/campaigns/query/'], ['POST', '/Campaigns/query'], ['POST', '/campaigns/query/extra'],
  ['POST', '//campaigns/query'], ['POST', '/campaigns%2Fquery'], ['POST', '/profiles'], ['POST', '/profiles/attribute'], ['POST', '/visitors/segment'],
  ['POST', '/visitors/query.json'], ['POST', '/api/v1/campaigns/query'], ['POST', '/segments'], ['GET', '/favicon.ico'], ['GET', '/.env'],
  ['GET', '/healthz/'], ['GET', '/admin'], ['GET', '/admin/'], ['GET', '/admin/accounts/'], ['GET', '/admin/accounts/{account}/tokens/x/y'],
  ['POST', '/admin/account'], ['DELETE', '/admin/accounts/{account}/nothing'],
]
for (const [method, path] of UNKNOWN_PATHS) {
  cases.push({ what: 'an unknown path', method, path, ...(method === 'POST' ? { body: (c: Ctx) => BASE.event(c) } : {}), status: 404, code: 'not_found' })
}
for (const ep of EPS) {
  // OPTIONS is the CORS preflight (test/http/browser-access.test.ts).
  for (const method of ['GET', 'PUT', 'PATCH', 'DELETE', 'HEAD']) {
    cases.push({ what: 'a wrong method', method, path: PATH[ep], status: 405, code: 'method_not_allowed', allow: 'POST, OPTIONS' })
  }
}
const ADMIN_METHODS: [string, string, string][] = [
  ['DELETE', '/admin/accounts', 'POST, GET'],
  ['PUT', '/admin/accounts', 'POST, GET'],
  ['POST', '/admin/accounts/{account}', 'GET, PATCH, DELETE'],
  ['PUT', '/admin/accounts/{account}', 'GET, PATCH, DELETE'],
  ['PATCH', '/admin/accounts/{account}/tokens', 'POST, GET'],
  ['GET', '/admin/accounts/{account}/tokens/{otherTokenId}', 'DELETE'],
  ['POST', '/admin/accounts/{account}/event-types', 'GET'],
  ['POST', '/admin/accounts/{account}/event-types/signup', 'PUT, GET, DELETE'],
  ['POST', '/healthz', 'GET'],
  ['DELETE', '/healthz', 'GET'],
]
for (const [method, path, allow] of ADMIN_METHODS) cases.push({ what: 'a wrong method', method, path, status: 405, code: 'method_not_allowed', allow })

// 13. The admin API ------------------------------------------------------------------------------------

const A = (what: string, method: string, path: string, body: ((c: Ctx) => unknown) | undefined, status: number, code: ErrorCode, extra: Partial<Case> = {}): void => {
  cases.push({ what, method, path, ...(body === undefined ? {} : { body }), status, code, ...extra })
}
const ARaw = (what: string, method: string, path: string, raw: string, status: number, code: ErrorCode, extra: Partial<Case> = {}): void => {
  cases.push({ what, method, path, raw: () => raw, status, code, ...extra })
}
// Authorization
for (const [label, auth] of [
  ['no Authorization header', null], ['a wrong admin key', 'Bearer wrong-key-0123456789abc'], ['the key as Basic', `Basic ${ADMIN_KEY}`],
  ['a lowercase "bearer"', `bearer ${ADMIN_KEY}`], ['the key with an extra character', `Bearer ${ADMIN_KEY}x`], ['the bare key', ADMIN_KEY], ['an empty Bearer', 'Bearer '],
] as const) {
  A(`${label}`, 'GET', '/admin/accounts', undefined, 401, 'admin_unauthorized', { auth })
}
A('no Authorization header', 'POST', '/admin/accounts', () => ({ name: 'x' }), 401, 'admin_unauthorized', { auth: null })
A('a wrong admin key', 'POST', '/admin/accounts/{account}/tokens', () => ({ name: 'x', attributes: ['*'], access: 'read' }), 401, 'admin_unauthorized', { auth: 'Bearer nope' })
A('a wrong admin key', 'PATCH', '/admin/accounts/{account}', () => ({ suspended: true }), 401, 'admin_unauthorized', { auth: 'Bearer nope' })
A('a wrong admin key', 'PUT', '/admin/accounts/{account}/event-types/hacked', () => ({ required: [] }), 401, 'admin_unauthorized', { auth: 'Bearer nope' })
A('no Authorization header', 'DELETE', '/admin/accounts/{other}/tokens/{otherTokenId}', undefined, 401, 'admin_unauthorized', { auth: null })
ARaw('no Authorization header and a 70,000-byte body (auth first)', 'POST', '/admin/accounts', '{"name":"x"}' + ' '.repeat(70_000), 401, 'admin_unauthorized', { auth: null })
// Bodies
for (const [what, raw] of [['truncated JSON', '{"name":"x'], ['an empty body', ''], ['a top-level array', '[{"name":"x"}]'], ['a top-level null', 'null'], ['a top-level string', '"x"'], ['single quotes', "{'name':'x'}"], ['a NaN literal', '{"name":NaN}'], ['trailing garbage', '{"name":"x"}}']] as const) {
  ARaw(what, 'POST', '/admin/accounts', raw, 400, 'invalid_json')
}
ARaw('truncated JSON', 'PATCH', '/admin/accounts/{account}', '{"suspended":', 400, 'invalid_json')
ARaw('a BOM-only body', 'POST', '/admin/accounts/{account}/tokens', '\uFEFF', 400, 'invalid_json')
ARaw('an empty body', 'PUT', '/admin/accounts/{account}/event-types/signup', '', 400, 'invalid_json')
ARaw('Content-Type text/plain', 'POST', '/admin/accounts', '{"name":"x"}', 415, 'unsupported_media_type', { contentType: 'text/plain' })
ARaw('no Content-Type', 'POST', '/admin/accounts', '{"name":"x"}', 415, 'unsupported_media_type', { contentType: null })
ARaw('Content-Type application/x-www-form-urlencoded', 'PATCH', '/admin/accounts/{account}', 'suspended=true', 415, 'unsupported_media_type', { contentType: 'application/x-www-form-urlencoded' })
ARaw('Content-Type multipart/form-data', 'PUT', '/admin/accounts/{account}/event-types/signup', '--b\r\n\r\n{"required":[]}\r\n--b--', 415, 'unsupported_media_type', { contentType: 'multipart/form-data; boundary=b' })
ARaw('a 70,000-byte body', 'POST', '/admin/accounts', '{"name":"x"}' + ' '.repeat(70_000), 413, 'body_too_large')
ARaw('a top-level "__proto__" key', 'POST', '/admin/accounts', '{"name":"x","__proto__":{"admin":true}}', 400, 'forbidden_key', { field: '/__proto__' })
ARaw('a "constructor" key in a token spec', 'POST', '/admin/accounts/{account}/tokens', '{"name":"x","attributes":["*"],"access":"read","constructor":{"prototype":{}}}', 400, 'forbidden_key', { field: '/constructor' })
ARaw('a "prototype" key', 'PATCH', '/admin/accounts/{account}', '{"prototype":{"suspended":true}}', 400, 'forbidden_key', { field: '/prototype' })
ARaw('a "__proto__" key inside required', 'PUT', '/admin/accounts/{account}/event-types/signup', '{"required":[{"__proto__":1}]}', 400, 'forbidden_key', { field: '/required/0/__proto__' })
ARaw('a "__proto__" key spelled "\\u005f_proto__"', 'POST', '/admin/accounts', '{"name":"x","\\u005f_proto__":{"admin":true}}', 400, 'forbidden_key', { field: '/__proto__' })
// Accounts
A('no name', 'POST', '/admin/accounts', () => ({}), 400, 'invalid_field', { field: '/name' })
A('an empty name', 'POST', '/admin/accounts', () => ({ name: '' }), 400, 'invalid_field', { field: '/name' })
A('a name of 201 characters', 'POST', '/admin/accounts', () => ({ name: over(200) }), 400, 'invalid_field', { field: '/name' })
A('a name that is a number', 'POST', '/admin/accounts', () => ({ name: 42 }), 400, 'invalid_field', { field: '/name' })
A('an unknown field', 'POST', '/admin/accounts', () => ({ name: 'x', suspended: false }), 400, 'unknown_field', { field: '/suspended' })
A('an empty patch', 'PATCH', '/admin/accounts/{account}', () => ({}), 400, 'invalid_field')
A('suspended as a string', 'PATCH', '/admin/accounts/{account}', () => ({ suspended: 'yes' }), 400, 'invalid_field', { field: '/suspended' })
A('a name of 201 characters', 'PATCH', '/admin/accounts/{account}', () => ({ name: over(200) }), 400, 'invalid_field', { field: '/name' })
A('an unknown field', 'PATCH', '/admin/accounts/{account}', () => ({ account: UNKNOWN_ACCOUNT }), 400, 'unknown_field', { field: '/account' })
A('an unknown account', 'PATCH', '/admin/accounts/{unknown}', () => ({ name: 'x' }), 404, 'account_not_found')
A('an unknown account', 'GET', '/admin/accounts/{unknown}', undefined, 404, 'account_not_found')
A('an account id that is not a UUID', 'GET', '/admin/accounts/not-a-uuid', undefined, 404, 'account_not_found')
A('a malformed %-escape as the account', 'GET', '/admin/accounts/%E0%A4%A', undefined, 404, 'account_not_found')
// Tokens
const spec = (fields: Record<string, unknown>) => () => ({ name: 't', attributes: ['color'], access: 'read', ...fields })
const TOKENS = '/admin/accounts/{account}/tokens'
A('no name', 'POST', TOKENS, () => ({ attributes: ['*'], access: 'read' }), 400, 'invalid_field', { field: '/name' })
A('no attributes', 'POST', TOKENS, () => ({ name: 't', access: 'read' }), 400, 'invalid_field', { field: '/attributes' })
A('no access', 'POST', TOKENS, () => ({ name: 't', attributes: ['*'] }), 400, 'invalid_field', { field: '/access' })
A('an empty attributes list', 'POST', TOKENS, spec({ attributes: [] }), 400, 'invalid_field', { field: '/attributes' })
A('"*" together with another attribute', 'POST', TOKENS, spec({ attributes: ['*', 'color'] }), 400, 'invalid_field', { field: '/attributes' })
A('an attribute name with a space', 'POST', TOKENS, spec({ attributes: ['favourite color'] }), 400, 'invalid_field', { field: '/attributes/0' })
A('1,001 attributes (limit 1,000)', 'POST', TOKENS, spec({ attributes: names(1001) }), 400, 'invalid_field', { field: '/attributes' })
A('attributes as a string', 'POST', TOKENS, spec({ attributes: '*' }), 400, 'invalid_field', { field: '/attributes' })
A('access "admin"', 'POST', TOKENS, spec({ access: 'admin' }), 400, 'invalid_field', { field: '/access' })
A('access "READ" (wrong case)', 'POST', TOKENS, spec({ access: 'READ' }), 400, 'invalid_field', { field: '/access' })
A('ratePerSecond 0', 'POST', TOKENS, spec({ ratePerSecond: 0 }), 400, 'invalid_field', { field: '/ratePerSecond' })
A('ratePerSecond -1', 'POST', TOKENS, spec({ ratePerSecond: -1 }), 400, 'invalid_field', { field: '/ratePerSecond' })
A('ratePerSecond 1.5', 'POST', TOKENS, spec({ ratePerSecond: 1.5 }), 400, 'invalid_field', { field: '/ratePerSecond' })
A('ratePerSecond "10"', 'POST', TOKENS, spec({ ratePerSecond: '10' }), 400, 'invalid_field', { field: '/ratePerSecond' })
A('ratePerSecond 1,000,001', 'POST', TOKENS, spec({ ratePerSecond: 1_000_001 }), 400, 'invalid_field', { field: '/ratePerSecond' })
A('an unknown field', 'POST', TOKENS, spec({ secret: 'mine' }), 400, 'unknown_field', { field: '/secret' })
ARaw('attributes as 10,000 nested arrays', 'POST', TOKENS, '{"name":"t","access":"read","attributes":' + nestArrays(10_000, '"*"') + '}', 400, 'invalid_field')
A('an unknown account', 'POST', '/admin/accounts/{unknown}/tokens', spec({}), 404, 'account_not_found')
A('an unknown account', 'GET', '/admin/accounts/{unknown}/tokens', undefined, 404, 'account_not_found')
A('revoking a token that does not exist', 'DELETE', '/admin/accounts/{account}/tokens/0123456789abcdef', undefined, 404, 'token_not_found')
A("revoking another account's token", 'DELETE', '/admin/accounts/{account}/tokens/{otherTokenId}', undefined, 404, 'token_not_found')
// Event types
const ET = '/admin/accounts/{account}/event-types'
A('no required list', 'PUT', `${ET}/signup2`, () => ({}), 400, 'invalid_field', { field: '/required' })
A('required as a string', 'PUT', `${ET}/signup2`, () => ({ required: 'plan' }), 400, 'invalid_field', { field: '/required' })
A('required holding a number', 'PUT', `${ET}/signup2`, () => ({ required: [1] }), 400, 'invalid_field', { field: '/required/0' })
A('a required field name with a space', 'PUT', `${ET}/signup2`, () => ({ required: ['the plan'] }), 400, 'invalid_field', { field: '/required/0' })
A('51 required fields (limit 50)', 'PUT', `${ET}/signup2`, () => ({ required: names(51) }), 400, 'invalid_field', { field: '/required' })
A('an unknown field', 'PUT', `${ET}/signup2`, () => ({ required: [], optional: [] }), 400, 'unknown_field', { field: '/optional' })
A('an event type name with a space', 'PUT', `${ET}/sign%20up`, () => ({ required: [] }), 400, 'invalid_field', { field: '/name' })
A('an event type name of 129 characters', 'PUT', `${ET}/${over(128)}`, () => ({ required: [] }), 400, 'invalid_field', { field: '/name' })
A('redefining the built-in pageView', 'PUT', `${ET}/pageView`, () => ({ required: ['x'] }), 409, 'conflict')
A('deleting the built-in purchase', 'DELETE', `${ET}/purchase`, undefined, 409, 'conflict')
A('an event type that does not exist', 'GET', `${ET}/nope`, undefined, 404, 'event_type_not_found')
A('deleting an event type that does not exist', 'DELETE', `${ET}/nope`, undefined, 404, 'event_type_not_found')
A('an unknown account', 'PUT', '/admin/accounts/{unknown}/event-types/signup', () => ({ required: [] }), 404, 'account_not_found')
A('an unknown account', 'GET', '/admin/accounts/{unknown}/event-types', undefined, 404, 'account_not_found')
