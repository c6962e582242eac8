// TikTok Events API double: POST /open_api/v1.3/event/track/ with the Access-Token header, checked as
// TikTok documents web events: event_source "web", event_source_id (the pixel code), data of 1 to 1,000
// events with event, event_time (Unix seconds), user identifiers email, phone and external_id as
// 64-digit lower-case SHA-256 hex. Answers as TikTok does, HTTP 200 with a code: 0 OK, 40001 for a bad
// token, 40002 for a bad parameter; a queued fault can answer 40100 (too many requests).

import { HttpDouble, parseJson, SHA256, type DoubleReply, type DoubleRequest } from './http-double.js'

export class TiktokDouble extends HttpDouble {
  readonly events: Array<Record<string, any>> = []
  readonly testEventCodes: string[] = []
  validTokens = new Set(['tt-token'])

  constructor () {
    super(request => this.answer(request))
  }

  /** A tiktok-events destination sending purchases to this double with the token it takes; `settings` and `extra` change it. */
  destination (settings: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      type: 'tiktok-events', name: 'TikTok', enabled: true, events: ['purchase'], credentials: { accessToken: 'tt-token' },
      settings: { pixelCode: 'C4ABCDEFGHIJ', apiBaseUrl: this.url, siteUrl: 'https://shop.example', ...settings },
      ...extra,
    }
  }

  static rateLimited (): DoubleReply {
    return { status: 200, body: { code: 40100, message: 'Too many requests. Please retry in some time.', request_id: 'r', data: {} } }
  }

  private answer (request: DoubleRequest): DoubleReply {
    if (request.method !== 'POST' || request.path !== '/open_api/v1.3/event/track/') return { status: 404 }
    if (!this.validTokens.has(String(request.headers['access-token'] ?? ''))) return fail(40001, 'Authentication error: access token is invalid')
    const body = parseJson(request.body) as Record<string, any> | undefined
    if (body === undefined) return fail(40002, 'invalid JSON')
    if (body.event_source !== 'web') return fail(40002, 'event_source must be web')
    if (typeof body.event_source_id !== 'string' || body.event_source_id === '') return fail(40002, 'event_source_id is required')
    if (!Array.isArray(body.data) || body.data.length === 0) return fail(40002, 'data is required')
    if (body.data.length > 1000) return fail(40002, 'data has at most 1000 events')
    for (const [i, event] of (body.data as Array<Record<string, any>>).entries()) {
      if (typeof event.event !== 'string' || event.event === '') return fail(40002, `data[${i}].event is required`)
      if (!Number.isInteger(event.event_time)) return fail(40002, `data[${i}].event_time must be Unix seconds`)
      const user = event.user ?? {}
      for (const key of ['email', 'phone', 'external_id']) {
        if (user[key] !== undefined && (typeof user[key] !== 'string' || !SHA256.test(user[key]))) return fail(40002, `data[${i}].user.${key} must be SHA-256 hashed`)
      }
    }
    if (typeof body.test_event_code === 'string') this.testEventCodes.push(body.test_event_code)
    this.events.push(...body.data)
    return { status: 200, body: { code: 0, message: 'OK', request_id: 'r', data: {} } }
  }
}

function fail (code: number, message: string): DoubleReply {
  return { status: 200, body: { code, message, request_id: 'r', data: {} } }
}
