// Meta Conversions API double: POST /{version}/{pixelId}/events?access_token=… checked against Meta's
// documented server event parameters (docs/destinations.md lists them): `data` of 1 to 1,000 events,
// each with event_name, event_time (Unix seconds, at most 7 days old, not in the future), action_source
// from Meta's list, user_data with customer information (em/ph/external_id as 64-digit lower-case
// SHA-256 hex lists); website events need client_user_agent and event_source_url; Purchase needs
// custom_data value and currency. Refusals are Meta's error body: {error: {message, type, code,
// error_subcode?, fbtrace_id}} (code 100 invalid parameter, 190 access token).

import { HttpDouble, parseJson, SHA256, type DoubleReply, type DoubleRequest } from './http-double.js'

const ACTION_SOURCES = new Set(['email', 'website', 'app', 'phone_call', 'chat', 'physical_store', 'system_generated', 'business_messaging', 'other'])
const SEVEN_DAYS_S = 7 * 86_400

export interface MetaEvent {
  event_name: string
  event_time: number
  event_id?: string
  action_source: string
  event_source_url?: string
  user_data: Record<string, unknown>
  custom_data?: Record<string, unknown>
}

export class MetaCapiDouble extends HttpDouble {
  /** Events accepted, in order. */
  readonly events: MetaEvent[] = []
  readonly testEventCodes: string[] = []
  validTokens = new Set(['meta-token'])

  constructor (nowMs: () => number = Date.now) {
    super(request => this.answer(request), nowMs)
  }

  /** A meta-capi destination sending purchases to this double with the token it takes; `settings` and `extra` change it. */
  destination (settings: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      type: 'meta-capi', name: 'Meta', enabled: true, events: ['purchase'], credentials: { accessToken: 'meta-token' },
      settings: { pixelId: '1234567890', apiBaseUrl: this.url, siteUrl: 'https://shop.example', ...settings },
      ...extra,
    }
  }

  /** Meta's answer when a token expired. */
  static expiredToken (): DoubleReply {
    return { status: 401, body: { error: { message: 'Error validating access token: Session has expired.', type: 'OAuthException', code: 190, error_subcode: 463, fbtrace_id: 'Atrace' } } }
  }

  /** A throttling answer (code 17: user request limit reached), which Meta sends with 400. */
  static throttled (): DoubleReply {
    return { status: 400, body: { error: { message: 'User request limit reached', type: 'OAuthException', code: 17, fbtrace_id: 'Atrace' } } }
  }

  private answer (request: DoubleRequest): DoubleReply {
    const match = /^\/(v[0-9]+\.[0-9]+)\/([0-9]+)\/events$/.exec(request.path)
    if (request.method !== 'POST' || match === null) return refuse(400, 100, `Unsupported ${request.method} request to ${request.path}`)
    const token = request.query.get('access_token')
    if (token === null || !this.validTokens.has(token)) return { status: 400, body: { error: { message: 'Invalid OAuth access token - Cannot parse access token', type: 'OAuthException', code: 190, fbtrace_id: 'Atrace' } } }
    const body = parseJson(request.body) as { data?: unknown, test_event_code?: unknown } | undefined
    if (body === undefined || !Array.isArray(body.data)) return refuse(400, 100, 'The parameter data is required')
    if (body.data.length === 0) return refuse(400, 100, 'data must not be empty')
    if (body.data.length > 1000) return refuse(400, 100, `You can send up to 1000 events at a time; you sent ${body.data.length}`)
    const nowS = Math.floor(this.nowMs() / 1000)
    for (const [i, event] of (body.data as unknown[]).entries()) {
      const problem = eventProblem(event, nowS)
      if (problem !== null) return refuse(400, 100, `Invalid parameter at data[${i}]: ${problem}`)
    }
    if (body.test_event_code !== undefined) {
      if (typeof body.test_event_code !== 'string') return refuse(400, 100, 'test_event_code must be a string')
      this.testEventCodes.push(body.test_event_code)
    }
    this.events.push(...(body.data as MetaEvent[]))
    return { status: 200, body: { events_received: body.data.length, messages: [], fbtrace_id: 'Atrace' } }
  }
}

function refuse (status: number, code: number, message: string): DoubleReply {
  return { status, body: { error: { message, type: 'OAuthException', code, fbtrace_id: 'Atrace' } } }
}

function eventProblem (raw: unknown, nowS: number): string | null {
  if (typeof raw !== 'object' || raw === null) return 'an event must be an object'
  const event = raw as Record<string, unknown>
  if (typeof event.event_name !== 'string' || event.event_name === '') return 'event_name is required'
  if (!Number.isInteger(event.event_time)) return 'event_time must be a Unix timestamp in seconds'
  const time = event.event_time as number
  if (time > nowS + 60) return 'event_time is in the future'
  if (time < nowS - SEVEN_DAYS_S) return 'event_time is more than 7 days in the past'
  if (typeof event.action_source !== 'string' || !ACTION_SOURCES.has(event.action_source)) return 'action_source is required and must be one of Meta\'s'
  if (event.event_id !== undefined && typeof event.event_id !== 'string') return 'event_id must be a string'
  const user = event.user_data
  if (typeof user !== 'object' || user === null) return 'user_data is required'
  const u = user as Record<string, unknown>
  for (const key of ['em', 'ph', 'external_id', 'fn', 'ln', 'ct', 'st', 'zp', 'country', 'db', 'ge']) {
    if (u[key] === undefined) continue
    const values = Array.isArray(u[key]) ? u[key] as unknown[] : [u[key]]
    if (key !== 'external_id' && values.some(value => typeof value !== 'string' || !SHA256.test(value))) return `user_data.${key} must be SHA-256 hashed (64 lower-case hex digits)`
  }
  const matchable = ['em', 'ph', 'external_id', 'fbp', 'fbc'].some(key => u[key] !== undefined) || (u.client_ip_address !== undefined && u.client_user_agent !== undefined)
  if (!matchable) return 'user_data has no customer information parameter Meta can match on'
  if (event.action_source === 'website') {
    if (typeof u.client_user_agent !== 'string') return 'client_user_agent is required for website events'
    if (typeof event.event_source_url !== 'string') return 'event_source_url is required for website events'
  }
  if (event.event_name === 'Purchase') {
    const custom = event.custom_data as Record<string, unknown> | undefined
    if (typeof custom?.value !== 'number' || typeof custom.currency !== 'string' || !/^[A-Z]{3}$/.test(custom.currency)) return 'Purchase events need custom_data.value and custom_data.currency'
  }
  return null
}
