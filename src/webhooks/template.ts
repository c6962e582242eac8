// {{placeholder}} templates, compiled once when a webhook is saved into literal parts and slot codes,
// so rendering is a loop of string concatenation: no regex, no parsing, no closures per render.
//
// Modes decide how a value is written:
// - 'json': a placeholder standing where a JSON value goes (`{"p": {{profileId}}}`) renders a whole JSON
//   value: strings quoted and escaped, numbers and booleans as is, lists and objects as JSON, absent as
//   null. A placeholder inside a string literal (`"Hi {{profileId}}"`) renders the escaped text of the
//   value without quotes (absent as nothing). Which of the two applies is decided at compile time from
//   the quote state of the literal text. `<`, `>`, `&`, U+2028 and U+2029 are written as \u escapes so a
//   payload can be embedded in HTML or a script safely.
// - 'url': encodeURIComponent of the value (lists and objects as their JSON text), absent as nothing.
// - 'header': the text of the value with control characters (CR, LF, NUL, …) removed and non-ASCII
//   characters percent-encoded as UTF-8, because header values are ASCII on the wire.
//
// The time placeholders come from the item, not the clock, so every attempt renders the same bytes:
// `timestamp` is occurredAtMs (Unix milliseconds, a number), `occurredAt` the same instant in ISO 8601.

import { CONFIG_LIMITS } from './limits.js'
import type { DeliveryItem } from './types.js'
import { WebhookError, WEBHOOK_ERRORS } from './webhook-error.js'

export const TEMPLATE_MODES = ['json', 'url', 'header'] as const
export type TemplateMode = typeof TEMPLATE_MODES[number]

/** Slot codes: what a placeholder reads. Numbers, so render switches on a small integer. */
const SLOT = {
  profileId: 0,
  visitorId: 1,
  account: 2,
  event: 3,
  audience: 4,
  change: 5,
  timestamp: 6,
  occurredAt: 7,
  eventField: 8,
  attribute: 9,
  fields: 10,
  replay: 11,
} as const

const SIMPLE_SLOTS: ReadonlyMap<string, number> = new Map([
  ['profileId', SLOT.profileId],
  ['visitorId', SLOT.visitorId],
  ['account', SLOT.account],
  ['event', SLOT.event],
  ['audience', SLOT.audience],
  ['change', SLOT.change],
  ['timestamp', SLOT.timestamp],
  ['occurredAt', SLOT.occurredAt],
  ['fields', SLOT.fields],
  ['replay', SLOT.replay],
])

/** The placeholders a template may use; `event.<field>` and `attribute.<name>` take any field name; `fields` is every field of the event. */
export const PLACEHOLDERS = [...SIMPLE_SLOTS.keys(), 'event.<field>', 'attribute.<name>'] as const

// Field and attribute names follow the API's name rule (NAME_PATTERN in src/patterns.ts).
const FIELD_NAME = /^[A-Za-z0-9_.:-]{1,128}$/

const BRACE_OPEN = 123 // '{'
const QUOTE = 34 // '"'
const BACKSLASH = 92 // '\\'

/** A template that failed to compile: where (0-based character offset) and which placeholder. */
export class TemplateError extends WebhookError {
  readonly position: number
  readonly placeholder: string | null
  constructor (message: string, position: number, placeholder: string | null) {
    super(WEBHOOK_ERRORS.invalid_template, message)
    this.name = 'TemplateError'
    this.position = position
    this.placeholder = placeholder
  }
}

export class Template {
  readonly source: string
  readonly mode: TemplateMode
  /** Placeholder names in order of appearance, as written (trimmed). */
  readonly placeholders: readonly string[]
  /** literals.length === slots.length + 1; output is literals[0] value0 literals[1] … */
  private readonly literals: readonly string[]
  private readonly slots: Uint8Array
  private readonly keys: readonly (string | null)[]
  /** json mode: 1 where the placeholder sits inside a string literal. */
  private readonly inString: Uint8Array

  constructor (source: string, mode: TemplateMode, literals: string[], slots: number[], keys: (string | null)[], names: string[], inString: number[]) {
    this.source = source
    this.mode = mode
    this.placeholders = names
    this.literals = literals
    this.slots = Uint8Array.from(slots)
    this.keys = keys
    this.inString = Uint8Array.from(inString)
  }

  /** The names `attribute.<name>` placeholders read (what a delivery must carry of the entity's attributes). */
  attributeNames (): string[] {
    const names: string[] = []
    for (let i = 0; i < this.slots.length; i++) if (this.slots[i] === SLOT.attribute) names.push(this.keys[i] as string)
    return names
  }

  /** True when the template has no placeholders (its text is the output). */
  get isConstant (): boolean {
    return this.slots.length === 0
  }

  render (item: DeliveryItem): string {
    const literals = this.literals
    let out = literals[0] as string
    for (let i = 0; i < this.slots.length; i++) {
      const value = valueOf(this.slots[i] as number, this.keys[i] as string | null, item)
      out += encode(this.mode, value, this.inString[i] === 1)
      out += literals[i + 1] as string
    }
    return out
  }
}

/** Compile a template; throws TemplateError with the character position of the first problem. */
export function compileTemplate (source: string, mode: TemplateMode): Template {
  const literals: string[] = []
  const slots: number[] = []
  const keys: (string | null)[] = []
  const names: string[] = []
  const positions: number[] = []
  let pos = 0
  for (;;) {
    let open = source.indexOf('{{', pos)
    if (open < 0) break
    // In a run of three or more braces the last two open the placeholder: `{"a":{{{x}}}}` is JSON
    // whose inner value is {{x}}, the braces before it are literal text.
    while (source.charCodeAt(open + 2) === BRACE_OPEN) open++
    const close = source.indexOf('}}', open + 2)
    if (close < 0) throw new TemplateError(`Unclosed placeholder at position ${open}: "{{" without "}}".`, open, null)
    const name = source.slice(open + 2, close).trim()
    const slot = slotOf(name)
    if (slot === null) {
      throw new TemplateError(`Unknown placeholder {{${name}}} at position ${open}; known: ${PLACEHOLDERS.join(', ')}.`, open, name)
    }
    if (slots.length >= CONFIG_LIMITS.placeholdersMax) {
      throw new TemplateError(`More than ${CONFIG_LIMITS.placeholdersMax} placeholders (at position ${open}).`, open, name)
    }
    literals.push(source.slice(pos, open))
    positions.push(open)
    slots.push(slot.code)
    keys.push(slot.key)
    names.push(name)
    pos = close + 2
  }
  literals.push(source.slice(pos))
  const inString = mode === 'json' ? stringStates(literals, positions) : new Array<number>(slots.length).fill(0)
  return new Template(source, mode, literals, slots, keys, names, inString)
}

function slotOf (name: string): { code: number, key: string | null } | null {
  const simple = SIMPLE_SLOTS.get(name)
  if (simple !== undefined) return { code: simple, key: null }
  const dot = name.indexOf('.')
  if (dot < 0) return null
  const head = name.slice(0, dot)
  const key = name.slice(dot + 1)
  if (!FIELD_NAME.test(key)) return null
  if (head === 'event') return { code: SLOT.eventField, key }
  if (head === 'attribute') return { code: SLOT.attribute, key }
  return null
}

/** For each placeholder, whether the JSON literal text before it leaves a string literal open. */
function stringStates (literals: readonly string[], positions: readonly number[]): number[] {
  const states: number[] = []
  let inString = false
  let escaped = false
  for (let i = 0; i < positions.length; i++) {
    const text = literals[i] as string
    for (let j = 0; j < text.length; j++) {
      const c = text.charCodeAt(j)
      if (!inString) {
        if (c === QUOTE) inString = true
      } else if (escaped) {
        escaped = false
      } else if (c === BACKSLASH) {
        escaped = true
      } else if (c === QUOTE) {
        inString = false
      }
    }
    const at = positions[i] as number
    if (escaped) throw new TemplateError(`A placeholder right after a backslash (position ${at}) would be escaped.`, at, null)
    states.push(inString ? 1 : 0)
  }
  return states
}

function valueOf (slot: number, key: string | null, item: DeliveryItem): unknown {
  const context = item.context
  switch (slot) {
    case SLOT.profileId: return context.profileId
    case SLOT.visitorId: return context.visitorId
    case SLOT.account: return context.account
    case SLOT.event: return context.event
    case SLOT.audience: return context.audience
    case SLOT.change: return context.change
    case SLOT.timestamp: return item.occurredAtMs
    case SLOT.occurredAt: return isoTime(item.occurredAtMs)
    case SLOT.eventField: return ownValue(context.eventFields, key as string)
    case SLOT.attribute: return ownValue(context.attributes ?? attributesOf(context.eventFields), key as string)
    case SLOT.fields: return ownFields(context.eventFields)
    case SLOT.replay: return item.replay
    default: return undefined
  }
}

/**
 * The names of an event body that say who and what (the payload has placeholders of their own) or prove
 * an identity: `{{fields}}` leaves them out. The token never reaches the outbox (actors/visitor.ts).
 */
const ENVELOPE = ['account', 'visitorId', 'profileId', 'profileIdSignature', 'event'] as const

/** The event's own fields (orderId, orderTotal, sku, …) for `{{fields}}`: a copy only when there is something to leave out. */
function ownFields (fields: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (fields === undefined) return undefined
  for (const name of ENVELOPE) {
    if (Object.hasOwn(fields, name)) {
      const rest: Record<string, unknown> = {}
      for (const key of Object.keys(fields)) if (!(ENVELOPE as readonly string[]).includes(key)) rest[key] = fields[key]
      return rest
    }
  }
  return fields
}

/** The `attributes` field of an event (what `attribute.<name>` reads when the context has none of its own). */
function attributesOf (fields: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  const attributes = fields === undefined || !Object.hasOwn(fields, 'attributes') ? undefined : fields.attributes
  return typeof attributes === 'object' && attributes !== null && !Array.isArray(attributes) ? attributes as Record<string, unknown> : undefined
}

// Own properties only: a field named "constructor" must not read Object.prototype.constructor.
function ownValue (record: Record<string, unknown> | undefined, key: string): unknown {
  return record !== undefined && Object.hasOwn(record, key) ? record[key] : undefined
}

/** The last time rendered: deliveries of one burst of events mostly share their millisecond. */
let isoMs = Number.NaN
let isoText = ''

function isoTime (ms: number): string | undefined {
  if (ms === isoMs) return isoText
  if (!Number.isFinite(ms)) return undefined
  isoText = new Date(ms).toISOString()
  isoMs = ms
  return isoText
}

function encode (mode: TemplateMode, value: unknown, inString: boolean): string {
  if (mode === 'json') return inString ? jsonText(value) : jsonValue(value)
  if (mode === 'url') return urlValue(value)
  return headerValue(value)
}

// ---- json ----

/** A complete JSON value. */
export function jsonValue (value: unknown): string {
  switch (typeof value) {
    case 'string': return htmlSafe(JSON.stringify(value))
    case 'number': return Number.isFinite(value) ? String(value) : 'null'
    case 'boolean': return value ? 'true' : 'false'
    case 'bigint': return String(value)
    case 'object': return value === null ? 'null' : htmlSafe(JSON.stringify(value) ?? 'null')
    default: return 'null'
  }
}

/** The content of a JSON string literal (no quotes). */
function jsonText (value: unknown): string {
  if (value === undefined || value === null) return ''
  if (typeof value === 'string') return stripQuotes(htmlSafe(JSON.stringify(value)))
  if (typeof value === 'object') return stripQuotes(htmlSafe(JSON.stringify(JSON.stringify(value) ?? '')))
  if (typeof value === 'function' || typeof value === 'symbol') return ''
  return String(value)
}

function stripQuotes (quoted: string): string {
  return quoted.slice(1, -1)
}

const HTML_UNSAFE = /[<>&\u2028\u2029]/g

function htmlSafe (json: string): string {
  // Scan first: almost no value has these characters, and then no replacement string is built.
  for (let i = 0; i < json.length; i++) {
    const c = json.charCodeAt(i)
    if (c === 60 || c === 62 || c === 38 || c === 0x2028 || c === 0x2029) return json.replace(HTML_UNSAFE, unicodeEscape)
  }
  return json
}

function unicodeEscape (char: string): string {
  return '\\u' + char.charCodeAt(0).toString(16).padStart(4, '0')
}

// ---- url ----

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g

function urlValue (value: unknown): string {
  if (value === undefined || value === null) return ''
  if (typeof value === 'string') return uriComponent(value)
  if (typeof value === 'object') return uriComponent(JSON.stringify(value) ?? '')
  if (typeof value === 'function' || typeof value === 'symbol') return ''
  // Numbers too: "1e+21" carries a '+', which a query reads as a space.
  return uriComponent(String(value))
}

export function uriComponent (text: string): string {
  try {
    return encodeURIComponent(text)
  } catch {
    // encodeURIComponent throws on a lone surrogate; write it as U+FFFD instead.
    return encodeURIComponent(text.replace(LONE_SURROGATE, '\uFFFD'))
  }
}

// ---- header ----

function headerValue (value: unknown): string {
  if (value === undefined || value === null) return ''
  if (typeof value === 'string') return headerSafe(value)
  if (typeof value === 'object') return headerSafe(JSON.stringify(value) ?? '')
  if (typeof value === 'function' || typeof value === 'symbol') return ''
  return String(value)
}

export function headerSafe (text: string): string {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if ((c < 0x20 && c !== 9) || c > 0x7e) return rebuildHeader(text)
  }
  return text
}

function rebuildHeader (text: string): string {
  let out = ''
  for (const char of text) {
    const c = char.charCodeAt(0)
    if ((c < 0x20 && c !== 9) || c === 0x7f) continue
    out += c > 0x7e ? uriComponent(char) : char
  }
  return out
}

// ---- the default payload ----

/**
 * Used when `payload` is absent (event and schedule webhooks): the seed's sample shape {profile, audience,
 * event, occurredAt}, kept for receivers written against it, plus what a receiver needs to act on the
 * event: the account, who (a visitor without a profile has only its visitorId) and the event's own fields
 * (orderId, orderTotal, sku, …).
 */
export const DEFAULT_PAYLOAD = '{"profile":{{profileId}},"audience":{{audience}},"event":{{event}},"occurredAt":{{occurredAt}},' +
  '"account":{{account}},"visitorId":{{visitorId}},"profileId":{{profileId}},"fields":{{fields}}}'

/** An audience webhook's default: the seed's shape plus the account, who (a visitor has no profile) and whether it was an enter or an exit. */
export const DEFAULT_AUDIENCE_PAYLOAD = '{"profile":{{profileId}},"visitorId":{{visitorId}},"audience":{{audience}},"change":{{change}},"event":{{event}},"occurredAt":{{occurredAt}},' +
  '"account":{{account}},"profileId":{{profileId}}}'
