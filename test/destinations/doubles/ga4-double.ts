// GA4 Measurement Protocol double: POST /mp/collect and /debug/mp/collect?measurement_id=G-…&api_secret=…
// as Google documents them. /mp/collect answers 204 whatever it got (GA4 drops invalid events silently,
// which is why the validation server exists); /debug/mp/collect answers 200 with validationMessages.
// Checked: measurement_id and api_secret present, client_id, at most 25 events, event names (letters,
// digits, underscores, starting with a letter, at most 40), no reserved names, params at most 25 a
// event, timestamp_micros within the last 72 hours.

import { HttpDouble, parseJson, type DoubleReply, type DoubleRequest } from './http-double.js'

const RESERVED = new Set(['ad_activeview', 'ad_click', 'ad_exposure', 'ad_query', 'ad_reward', 'adunit_exposure', 'app_clear_data', 'app_exception', 'app_install', 'app_remove', 'app_store_refund', 'app_update', 'app_upgrade', 'dynamic_link_app_open', 'dynamic_link_app_update', 'dynamic_link_first_open', 'error', 'first_open', 'first_visit', 'in_app_purchase', 'notification_dismiss', 'notification_foreground', 'notification_open', 'notification_receive', 'notification_send', 'os_update', 'session_start', 'user_engagement'])

export interface Ga4Payload {
  client_id: string
  user_id?: string
  timestamp_micros?: number
  events: Array<{ name: string, params?: Record<string, unknown> }>
}

export class Ga4Double extends HttpDouble {
  /** Payloads /mp/collect received that the validation server would pass. */
  readonly collected: Ga4Payload[] = []
  /** Payloads /mp/collect received that it would not (dropped silently by GA4). */
  readonly dropped: Array<{ payload: unknown, messages: string[] }> = []
  apiSecret = 'ga-secret'

  constructor (nowMs: () => number = Date.now) {
    super(request => this.answer(request), nowMs)
  }

  /** A ga4 destination sending purchases to this double with the secret it takes; `settings` and `extra` change it. */
  destination (settings: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      type: 'ga4', name: 'GA4', enabled: true, events: ['purchase'], credentials: { apiSecret: 'ga-secret' },
      settings: { measurementId: 'G-TEST1234', apiBaseUrl: this.url, ...settings },
      ...extra,
    }
  }

  private answer (request: DoubleRequest): DoubleReply {
    const debug = request.path === '/debug/mp/collect'
    if (request.method !== 'POST' || (request.path !== '/mp/collect' && !debug)) return { status: 404 }
    const messages: Array<{ fieldPath: string, description: string, validationCode: string }> = []
    const problem = (fieldPath: string, description: string, validationCode = 'VALUE_INVALID'): void => { messages.push({ fieldPath, description, validationCode }) }
    if (!/^G-[A-Z0-9]+$/.test(request.query.get('measurement_id') ?? '')) problem('measurement_id', 'Measurement ID is required.', 'VALUE_REQUIRED')
    // A wrong api_secret is not reported: GA4 drops the hits.
    const secretOk = request.query.get('api_secret') === this.apiSecret
    const payload = parseJson(request.body) as Partial<Ga4Payload> | undefined
    if (payload === undefined) {
      problem('', 'Unable to parse the payload as JSON.')
    } else {
      if (typeof payload.client_id !== 'string' || payload.client_id === '') problem('client_id', 'client_id is required.', 'VALUE_REQUIRED')
      if (!Array.isArray(payload.events) || payload.events.length === 0) problem('events', 'events is required.', 'VALUE_REQUIRED')
      else if (payload.events.length > 25) problem('events', `A request can have a maximum of 25 events, not ${payload.events.length}.`, 'EXCEEDED_MAX_ENTITIES')
      else {
        for (const [i, event] of payload.events.entries()) {
          if (typeof event.name !== 'string' || !/^[A-Za-z][A-Za-z0-9_]{0,39}$/.test(event.name)) problem(`events[${i}].name`, 'Event names must start with a letter and use only letters, numbers and underscores, at most 40.', 'NAME_INVALID')
          else if (RESERVED.has(event.name)) problem(`events[${i}].name`, `${event.name} is a reserved name.`, 'NAME_RESERVED')
          if (event.params !== undefined && Object.keys(event.params).length > 25) problem(`events[${i}].params`, 'At most 25 params an event.', 'EXCEEDED_MAX_ENTITIES')
        }
      }
      if (payload.timestamp_micros !== undefined && payload.timestamp_micros < (this.nowMs() - 72 * 3_600_000) * 1000) problem('timestamp_micros', 'Timestamps may be at most 72 hours in the past.')
    }
    if (debug) return { status: 200, body: { validationMessages: messages } }
    if (messages.length > 0 || !secretOk) this.dropped.push({ payload, messages: messages.map(m => m.description) })
    else this.collected.push(payload as Ga4Payload)
    return { status: 204 }
  }
}
