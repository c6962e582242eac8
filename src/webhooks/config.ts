// The webhook configuration: its TypeBox schema (also the OpenAPI source) and validateWebhook, which
// lists every problem of a body as {code, field (JSON pointer), message}. The schema catches shapes and
// limits; the checks after it catch what a schema cannot say: templates that do not compile or cannot
// render valid JSON, URLs, header names, cron patterns, secrets, contradictory delivery settings.

import Type, { type Static, type TSchema } from 'typebox'
import { Compile } from 'typebox/compile'
import { ApiError, errorItem, type ErrorItem } from '../errors.js'
import { NAME_PATTERN } from '../patterns.js'
import { validator } from '../validator.js'
import { CONFIG_LIMITS as L } from './limits.js'
import { REDACTED, isSecretHeader } from './redact.js'
import { literalRefusal } from './ssrf.js'
import { parseCron, parseEvery } from './schedule.js'
import { compileTemplate, DEFAULT_PAYLOAD, TemplateError, type Template } from './template.js'
import type { DeliveryItem } from './types.js'

const WebhookName = Type.String({ minLength: 1, maxLength: L.nameLengthMax })
const Names = Type.Array(Type.String({ pattern: NAME_PATTERN }), { minItems: 1, maxItems: L.namesMax })

export const EventTrigger = Type.Object({
  kind: Type.Literal('event'),
  events: Names,
}, { additionalProperties: false })

export const AudienceTrigger = Type.Object({
  kind: Type.Literal('audience'),
  segments: Names,
  on: Type.Array(Type.Union([Type.Literal('enter'), Type.Literal('exit')]), { minItems: 1, maxItems: 2, uniqueItems: true }),
}, { additionalProperties: false })

export const ScheduleTrigger = Type.Object({
  kind: Type.Literal('schedule'),
  cron: Type.Optional(Type.String({ minLength: 1, maxLength: L.cronLengthMax })),
  every: Type.Optional(Type.String({ minLength: 2, maxLength: 16 })),
  segments: Type.Optional(Type.Array(Type.String({ pattern: NAME_PATTERN }), { maxItems: L.namesMax })),
}, { additionalProperties: false })

export const BasicAuth = Type.Object({
  type: Type.Literal('basic'),
  username: Type.String({ minLength: 1, maxLength: L.usernameLengthMax }),
  password: Type.String({ maxLength: L.passwordLengthMax }),
}, { additionalProperties: false })

export const BearerAuth = Type.Object({
  type: Type.Literal('bearer'),
  token: Type.String({ minLength: 1, maxLength: L.tokenLengthMax }),
}, { additionalProperties: false })

export const HTTP_METHODS = ['GET', 'POST', 'PUT', 'DELETE'] as const
export type HttpMethod = typeof HTTP_METHODS[number]

const Method = Type.Union([Type.Literal('GET'), Type.Literal('POST'), Type.Literal('PUT'), Type.Literal('DELETE')])
// An object with no fixed keys rather than Type.Record: TypeBox then reports every bad entry.
const Headers = Type.Unsafe<Record<string, string>>(Type.Object({}, {
  additionalProperties: Type.String({ maxLength: L.headerValueLengthMax }),
  maxProperties: L.headersMax,
}))

function requestShape<A extends TSchema> (auth: A) {
  return Type.Object({
    method: Method,
    url: Type.String({ minLength: 1, maxLength: L.urlLengthMax }),
    headers: Type.Optional(Headers),
    auth: Type.Optional(auth),
    signingSecret: Type.Optional(Type.String({ minLength: 1, maxLength: L.secretLengthMax })),
    payload: Type.Optional(Type.String({ maxLength: L.payloadLengthMax })),
  }, { additionalProperties: false })
}

export const WebhookDelivery = Type.Object({
  mode: Type.Union([Type.Literal('sync'), Type.Literal('async')]),
  timeoutMs: Type.Integer({ minimum: L.timeoutMinMs, maximum: L.timeoutMaxMs }),
  proxy: Type.Optional(Type.String({ minLength: 1, maxLength: L.urlLengthMax })),
  delayMs: Type.Optional(Type.Integer({ minimum: 0, maximum: L.delayMaxMs })),
  batchSize: Type.Integer({ minimum: 1, maximum: L.batchSizeMax }),
  maxAttempts: Type.Optional(Type.Integer({ minimum: 1, maximum: L.attemptsMax, default: L.attemptsDefault })),
  ratePerSecond: Type.Optional(Type.Number({ minimum: L.rateMinPerSecond, maximum: L.rateMaxPerSecond })),
}, { additionalProperties: false })

function webhookShape<T extends TSchema, A extends TSchema> (trigger: T, auth: A) {
  // The error path checks the same fields section by section (TopCheck, RequestCheck, …): keep them in step.
  return Type.Object({
    name: WebhookName,
    enabled: Type.Boolean(),
    trigger,
    request: requestShape(auth),
    delivery: WebhookDelivery,
  }, { additionalProperties: false })
}

/** The whole configuration (PUT /admin/accounts/{account}/webhooks/{id} body). */
export const WebhookConfigSchema = webhookShape(
  Type.Union([EventTrigger, AudienceTrigger, ScheduleTrigger]),
  Type.Union([BasicAuth, BearerAuth])
)
export type WebhookConfig = Static<typeof WebhookConfigSchema>
export type WebhookTrigger = WebhookConfig['trigger']
export type WebhookAuth = NonNullable<WebhookConfig['request']['auth']>

// Error reports are built section by section: TypeBox stops collecting errors after 8 per check (its
// global maxErrors setting, which belongs to the whole process), and a union reports a failed branch as
// "must be one of the accepted types". So the top level, the trigger, the request, its headers, its auth
// and the delivery are checked separately, and each union in two steps: first the discriminant, then
// the branch it names, so a bad field inside a trigger is reported at its own pointer.
const TRIGGER_KINDS = ['event', 'audience', 'schedule'] as const
const AUTH_TYPES = ['basic', 'bearer'] as const
const AnyObject = Type.Object({}, { additionalProperties: true })
const Head = (key: string, values: readonly string[]): TSchema =>
  Type.Object({ [key]: Type.Union(values.map(v => Type.Literal(v))) }, { additionalProperties: true })
const TopCheck = validator(Type.Object({
  name: WebhookName,
  enabled: Type.Boolean(),
  trigger: Head('kind', TRIGGER_KINDS),
  request: AnyObject,
  delivery: AnyObject,
}, { additionalProperties: false }))
const RequestCheck = validator(Type.Object({ ...requestShape(Head('type', AUTH_TYPES)).properties, headers: Type.Optional(AnyObject) }, { additionalProperties: false }))
const HeadersCheck = validator(Headers)
const DeliveryCheck = validator(WebhookDelivery)
const TRIGGER_CHECKS = { event: validator(EventTrigger), audience: validator(AudienceTrigger), schedule: validator(ScheduleTrigger) } as const
const AUTH_CHECKS = { basic: validator(BasicAuth), bearer: validator(BearerAuth) } as const
const FastCheck = Compile(WebhookConfigSchema)

export interface ValidateOptions {
  /** BEACON_WEBHOOK_ALLOW_PRIVATE: when false, an IP-literal or localhost url/proxy is refused at save time. */
  allowPrivate?: boolean
}

/** Every problem of a webhook configuration body; an empty list means it can be saved and compiled. */
export function validateWebhook (body: unknown, options: ValidateOptions = {}): ErrorItem[] {
  const problems = new Problems()
  if (!FastCheck.Check(body)) schemaProblems(body, problems)
  semanticProblems(body, options.allowPrivate === true, problems)
  return problems.items
}

/** validateWebhook, throwing a 400 ApiError listing the problems. Returns the typed config. */
export function assertWebhook (body: unknown, options: ValidateOptions = {}): WebhookConfig {
  const items = validateWebhook(body, options)
  if (items.length > 0) throw ApiError.of(items, 'The webhook configuration is invalid.')
  return body as WebhookConfig
}

/** Problems, at most one per field; a later check never repeats a field (or its parent) already reported. */
class Problems {
  readonly items: ErrorItem[] = []

  add (item: ErrorItem): void {
    const field = item.field ?? ''
    for (const seen of this.items) {
      const at = seen.field ?? ''
      if (field === at || field.startsWith(at + '/')) return
    }
    this.items.push(item)
  }

  /** Items of a section check, moved under `prefix` (fields and the labels their messages start with). */
  addAll (items: readonly ErrorItem[], prefix = ''): void {
    for (const item of items) {
      if (prefix === '' || item.field === undefined) {
        this.add(item)
        continue
      }
      const field = prefix + item.field
      const label = item.field === '' ? 'The body' : item.field.slice(1)
      const message = item.message.startsWith(label + ' ') || item.message.startsWith(label + ':') ? field.slice(1) + item.message.slice(label.length) : item.message
      this.add({ ...item, field, message })
    }
  }

  invalid (field: string, message: string): void {
    this.add(errorItem('invalid_field', field, message))
  }
}

function schemaProblems (body: unknown, problems: Problems): void {
  problems.addAll(caught(TopCheck, body))
  const trigger = objectAt(body, 'trigger')
  const kind = trigger?.kind
  if (typeof kind === 'string' && Object.hasOwn(TRIGGER_CHECKS, kind)) {
    problems.addAll(caught(TRIGGER_CHECKS[kind as keyof typeof TRIGGER_CHECKS], trigger), '/trigger')
  }
  const request = objectAt(body, 'request')
  if (request !== undefined) {
    problems.addAll(caught(RequestCheck, request), '/request')
    const headers = objectAt(request, 'headers')
    if (headers !== undefined) problems.addAll(caught(HeadersCheck, headers), '/request/headers')
    const auth = objectAt(request, 'auth')
    const type = auth?.type
    if (typeof type === 'string' && Object.hasOwn(AUTH_CHECKS, type)) {
      problems.addAll(caught(AUTH_CHECKS[type as keyof typeof AUTH_CHECKS], auth), '/request/auth')
    }
  }
  const delivery = objectAt(body, 'delivery')
  if (delivery !== undefined) problems.addAll(caught(DeliveryCheck, delivery), '/delivery')
}

function caught (check: (body: unknown) => unknown, body: unknown): ErrorItem[] {
  try {
    check(body)
    return []
  } catch (err) {
    if (err instanceof ApiError) return err.items
    throw err
  }
}

function objectAt (value: unknown, key: string): Record<string, unknown> | undefined {
  if (typeof value !== 'object' || value === null) return undefined
  const child = (value as Record<string, unknown>)[key]
  return typeof child === 'object' && child !== null && !Array.isArray(child) ? child as Record<string, unknown> : undefined
}

// ---- checks a schema cannot express ----

function semanticProblems (body: unknown, allowPrivate: boolean, problems: Problems): void {
  const trigger = objectAt(body, 'trigger')
  const request = objectAt(body, 'request')
  const delivery = objectAt(body, 'delivery')
  if (trigger?.kind === 'schedule') scheduleProblems(trigger, problems)
  if (request !== undefined) requestProblems(request, allowPrivate, problems)
  if (delivery !== undefined) deliveryProblems(delivery, trigger, allowPrivate, problems)
}

function scheduleProblems (trigger: Record<string, unknown>, problems: Problems): void {
  const { cron, every } = trigger
  if ((cron === undefined) === (every === undefined)) {
    problems.invalid('/trigger', 'A schedule trigger needs exactly one of cron and every.')
    return
  }
  if (typeof every === 'string') {
    const ms = parseEvery(every)
    if (typeof ms === 'string') problems.invalid('/trigger/every', ms)
  }
  if (typeof cron === 'string') {
    const parsed = parseCron(cron)
    if (typeof parsed === 'string') problems.invalid('/trigger/cron', parsed)
  }
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/
const CONTROL = /[\u0000-\u0008\u000a-\u001f\u007f]/
const VISIBLE_ASCII = /^[\u0021-\u007e]+$/
const SECRET = /^whsec_[A-Za-z0-9+/]+={0,2}$/
// Headers Beacon writes itself; a custom value would break framing or the signature.
const RESERVED_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', 'te', 'trailer',
  'proxy-authorization', 'proxy-connection', 'expect', 'webhook-id', 'webhook-timestamp', 'webhook-signature'])

function requestProblems (request: Record<string, unknown>, allowPrivate: boolean, problems: Problems): void {
  const method = typeof request.method === 'string' ? request.method : 'POST'
  if (typeof request.url === 'string') urlProblems(request.url, allowPrivate, problems)
  const headers = objectAt(request, 'headers')
  const auth = objectAt(request, 'auth')
  if (headers !== undefined) headerProblems(headers, auth !== undefined, problems)
  if (auth !== undefined) authProblems(auth, problems)
  if (typeof request.signingSecret === 'string') secretProblems(request.signingSecret, problems)
  const payload = request.payload === undefined ? DEFAULT_PAYLOAD : request.payload
  if (typeof payload === 'string') payloadProblems(payload, method === 'GET' || method === 'DELETE', problems)
}

function urlProblems (url: string, allowPrivate: boolean, problems: Problems): void {
  const template = templateOrProblem(url, 'url', '/request/url', problems)
  if (template === null) return
  const originEnd = originEndOf(url)
  if (template.placeholders.length > 0 && url.indexOf('{{') < originEnd) {
    problems.invalid('/request/url', 'Placeholders are allowed in the path and query of the url, not in its scheme, host or port.')
    return
  }
  const target = parseUrl(template.render(SAMPLE_ITEMS[0] as DeliveryItem))
  if (target === null || (target.protocol !== 'http:' && target.protocol !== 'https:') || target.hostname === '') {
    problems.invalid('/request/url', 'url must be an absolute http:// or https:// URL.')
  } else if (target.username !== '' || target.password !== '') {
    problems.invalid('/request/url', 'url must not carry credentials; use request.auth.')
  } else if (url.includes('#')) {
    problems.invalid('/request/url', 'url must not have a #fragment (it is never sent).')
  } else if (!allowPrivate) {
    const refused = literalRefusal(target.hostname)
    if (refused !== null) problems.invalid('/request/url', refused.message)
  }
}

function headerProblems (headers: Record<string, unknown>, hasAuth: boolean, problems: Problems): void {
  const seen = new Set<string>()
  for (const [name, value] of Object.entries(headers)) {
    const field = '/request/headers/' + pointerEscape(name)
    const lower = name.toLowerCase()
    if (name.length > L.headerNameLengthMax || !TOKEN.test(name)) {
      problems.invalid(field, `The header name ${JSON.stringify(name)} is not a valid HTTP header name.`)
    } else if (seen.has(lower)) {
      problems.invalid(field, `The header ${name} is given twice (header names are case-insensitive).`)
    } else if (RESERVED_HEADERS.has(lower)) {
      problems.invalid(field, `The header ${name} is set by Beacon and cannot be configured.`)
    } else if (lower === 'authorization' && hasAuth) {
      problems.invalid(field, 'Authorization is set by request.auth; configure one or the other.')
    } else if (typeof value === 'string') {
      if (CONTROL.test(value)) problems.invalid(field, 'A header value must not contain CR, LF or other control characters.')
      else if (value === REDACTED && isSecretHeader(name)) problems.invalid(field, `${REDACTED} is what GET shows for a secret; send the value itself.`)
      else templateOrProblem(value, 'header', field, problems)
    }
    seen.add(lower)
  }
}

function authProblems (auth: Record<string, unknown>, problems: Problems): void {
  const { username, password, token } = auth
  if (typeof username === 'string' && (username.includes(':') || CONTROL.test(username))) {
    problems.invalid('/request/auth/username', 'username must not contain ":" or control characters.')
  }
  if (password === REDACTED) problems.invalid('/request/auth/password', `${REDACTED} is what GET shows for a secret; send the password itself.`)
  if (typeof token === 'string') {
    if (token === REDACTED) problems.invalid('/request/auth/token', `${REDACTED} is what GET shows for a secret; send the token itself.`)
    else if (!VISIBLE_ASCII.test(token)) problems.invalid('/request/auth/token', 'token must be visible ASCII without spaces.')
  }
}

function secretProblems (secret: string, problems: Problems): void {
  if (secret === REDACTED) {
    problems.invalid('/request/signingSecret', `${REDACTED} is what GET shows for a secret; send the secret itself.`)
    return
  }
  const bytes = SECRET.test(secret) ? Buffer.from(secret.slice(6), 'base64').length : 0
  if (bytes < L.secretSizeMinBytes || bytes > L.secretSizeMaxBytes) {
    problems.invalid('/request/signingSecret', `signingSecret must be "whsec_" followed by the base64 of ${L.secretSizeMinBytes} to ${L.secretSizeMaxBytes} random bytes.`)
  }
}

function payloadProblems (payload: string, inQuery: boolean, problems: Problems): void {
  const template = templateOrProblem(payload, 'json', '/request/payload', problems)
  if (template === null) return
  const message = jsonRenderProblem(template, inQuery)
  if (message !== null) problems.invalid('/request/payload', message)
}

/**
 * Render the payload with every placeholder set to a value of each JSON type in turn (a string full of
 * characters that need escaping, a number, a boolean, null, a list, an object) and parse each result.
 * A placeholder where a value goes, or inside a string, renders valid JSON for any value; any other
 * position fails at least one of these renders. GET/DELETE payloads must be objects (they become the query).
 */
export function jsonRenderProblem (template: Template, mustBeObject: boolean): string | null {
  for (const item of SAMPLE_ITEMS) {
    const text = template.render(item)
    let parsed: unknown
    try {
      parsed = JSON.parse(text)
    } catch (err) {
      return `payload does not render valid JSON (${(err as Error).message}). Write {{name}} where a JSON value goes, or inside a string literal.`
    }
    if (mustBeObject && (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))) {
      return 'payload of a GET or DELETE webhook must render a JSON object: its fields become the query parameters.'
    }
  }
  return null
}

function deliveryProblems (delivery: Record<string, unknown>, trigger: Record<string, unknown> | undefined, allowPrivate: boolean, problems: Problems): void {
  if (delivery.mode === 'sync' && typeof delivery.delayMs === 'number' && delivery.delayMs > 0) {
    problems.invalid('/delivery/delayMs', 'A sync webhook is called while the triggering request is handled; it cannot have a delay.')
  }
  if (delivery.mode === 'sync' && trigger?.kind === 'schedule') {
    problems.invalid('/delivery/mode', 'A scheduled webhook has no triggering request; its mode must be async.')
  }
  if (typeof delivery.proxy === 'string') {
    const proxy = parseUrl(delivery.proxy)
    if (proxy === null || (proxy.protocol !== 'http:' && proxy.protocol !== 'https:') || proxy.hostname === '') {
      problems.invalid('/delivery/proxy', 'proxy must be an http:// or https:// URL like http://host:port.')
    } else if (proxy.username !== '' || proxy.password !== '') {
      problems.invalid('/delivery/proxy', 'proxy credentials are not supported.')
    } else if (proxy.pathname !== '/' || proxy.search !== '' || proxy.hash !== '') {
      problems.invalid('/delivery/proxy', 'proxy must be only scheme, host and port, like http://host:port.')
    } else if (!allowPrivate) {
      const refused = literalRefusal(proxy.hostname)
      if (refused !== null) problems.invalid('/delivery/proxy', refused.message.replace('webhook target', 'proxy'))
    }
  }
}

function templateOrProblem (source: string, mode: 'json' | 'url' | 'header', field: string, problems: Problems): Template | null {
  try {
    return compileTemplate(source, mode)
  } catch (err) {
    if (!(err instanceof TemplateError)) throw err
    problems.invalid(field, err.message)
    return null
  }
}

function parseUrl (text: string): URL | null {
  try {
    return new URL(text)
  } catch {
    return null
  }
}

/** Where the origin of a url ends: at the first '/', '?' or '#' after its '://'. */
export function originEndOf (url: string): number {
  const schemeEnd = url.indexOf('://')
  for (let i = schemeEnd < 0 ? 0 : schemeEnd + 3; i < url.length; i++) {
    const c = url[i]
    if (c === '/' || c === '?' || c === '#') return i
  }
  return url.length
}

function pointerEscape (key: string): string {
  return key.replace(/~/g, '~0').replace(/\//g, '~1')
}

// ---- samples for the render check ----

const TRICKY = 'He said "hi" \\ back\nslash\t</script><!-- & \u2028 ü 😀'
const SAMPLE_VALUES: readonly unknown[] = [TRICKY, -12.5, true, null, ['a', 'b'], { k: 'v' }]

function sampleItem (value: unknown): DeliveryItem {
  // The Proxy answers every field name with the sample value, whatever names the template asks for.
  const fields = new Proxy({}, { has: () => true, get: () => value, getOwnPropertyDescriptor: () => ({ value, enumerable: true, configurable: true }) })
  const text = value as string
  return {
    id: 'sample',
    occurredAtMs: Date.UTC(2025, 0, 1),
    context: { account: text, profileId: text, visitorId: text, event: text, audience: text, change: text, eventFields: fields, attributes: fields },
  }
}

const SAMPLE_ITEMS: readonly DeliveryItem[] = SAMPLE_VALUES.map(sampleItem)
