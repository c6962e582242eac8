// Meta Custom Audience double: POST (add) and DELETE (remove) /{version}/{audienceId}/users?access_token=…
// with {payload: {schema, data}, session?}, checked as Meta documents: schema keys from Meta's list, each
// row as long as the schema, hashed keys as 64-digit lower-case SHA-256 hex ("" for a missing value),
// at most 10,000 rows, a session with session_id, batch_seq, last_batch_flag. Keeps each audience's
// members (by row) so tests see adds and removes; answers {audience_id, session_id, num_received,
// num_invalid_entries, invalid_entry_samples}.

import { HttpDouble, parseJson, SHA256, type DoubleReply, type DoubleRequest } from './http-double.js'

const KEYS = new Set(['EMAIL', 'PHONE', 'GEN', 'DOBY', 'DOBM', 'DOBD', 'LN', 'FN', 'FI', 'CT', 'ST', 'ZIP', 'MADID', 'COUNTRY', 'EXTERN_ID', 'EMAIL_SHA256', 'PHONE_SHA256'])
const HASHED = new Set(['EMAIL', 'PHONE', 'LN', 'FN', 'CT', 'ST', 'ZIP', 'EMAIL_SHA256', 'PHONE_SHA256'])

export class MetaAudienceDouble extends HttpDouble {
  /** audience id → rows ("email|phone") currently in it. */
  readonly members = new Map<string, Set<string>>()
  validTokens = new Set(['meta-token'])
  /** Rows whose email hash is listed here are counted as invalid entries (Meta's partial failure). */
  readonly invalid = new Set<string>()

  constructor () {
    super(request => this.answer(request))
  }

  audience (id: string): string[] {
    return [...this.members.get(id) ?? []].sort()
  }

  private answer (request: DoubleRequest): DoubleReply {
    const match = /^\/v[0-9]+\.[0-9]+\/([0-9]+)\/users$/.exec(request.path)
    if ((request.method !== 'POST' && request.method !== 'DELETE') || match === null) return refuse(100, `Unsupported ${request.method} request to ${request.path}`)
    if (!this.validTokens.has(request.query.get('access_token') ?? '')) return { status: 400, body: { error: { message: 'Invalid OAuth access token', type: 'OAuthException', code: 190 } } }
    const body = parseJson(request.body) as { payload?: { schema?: unknown, data?: unknown }, session?: Record<string, unknown> } | undefined
    const schema = body?.payload?.schema
    const data = body?.payload?.data
    if (!Array.isArray(schema) || schema.length === 0 || schema.some(key => typeof key !== 'string' || !KEYS.has(key))) return refuse(100, 'payload.schema must list Meta\'s keys')
    if (!Array.isArray(data) || data.length === 0) return refuse(100, 'payload.data is required')
    if (data.length > 10_000) return refuse(100, `at most 10000 users a request, not ${data.length}`)
    const session = body?.session
    if (session !== undefined && (!Number.isInteger(session.session_id) || !Number.isInteger(session.batch_seq) || typeof session.last_batch_flag !== 'boolean')) {
      return refuse(100, 'session needs session_id, batch_seq and last_batch_flag')
    }
    let invalid = 0
    const rows: string[] = []
    for (const row of data as unknown[]) {
      if (!Array.isArray(row) || row.length !== schema.length) return refuse(100, 'every row must have one value per schema key')
      for (const [i, value] of row.entries()) {
        if (typeof value !== 'string') return refuse(100, 'values must be strings')
        if (value !== '' && HASHED.has(schema[i] as string) && !SHA256.test(value)) return refuse(100, `${String(schema[i])} values must be SHA-256 hashed`)
      }
      if (row.every(value => value === '') || this.invalid.has(row[0] as string)) {
        invalid++
        continue
      }
      rows.push(row.join('|'))
    }
    const audience = match[1]!
    const members = this.members.get(audience) ?? new Set<string>()
    this.members.set(audience, members)
    for (const row of rows) {
      if (request.method === 'POST') members.add(row)
      else members.delete(row)
    }
    return { status: 200, body: { audience_id: audience, session_id: session?.session_id ?? 0, num_received: data.length, num_invalid_entries: invalid, invalid_entry_samples: {} } }
  }
}

function refuse (code: number, message: string): DoubleReply {
  return { status: 400, body: { error: { message, type: 'OAuthException', code } } }
}
