// meta-audience: Meta Custom Audience membership. POST {apiBaseUrl}/{apiVersion}/{audienceId}/users adds,
// DELETE the same path removes, each with {payload: {schema, data}, session} and the access token; at
// most 10,000 people a request. The schema is ["EMAIL", "PHONE"]: each row the SHA-256 of the normalized
// email and phone (digits with the country code), "" where one is missing. Each request is one session
// of one batch (session_id from the delivery's id, batch_seq 1, last_batch_flag true), so a retry of it
// is the same session. Meta answers num_received and num_invalid_entries: invalid entries are recorded as
// a partial failure.

import { createHash } from 'node:crypto'
import Type from 'typebox'
import { audienceChanges } from './audience-changes.js'
import { jsonOf } from './answers.js'
import { META_API_VERSION, metaOutcome } from './meta-capi.js'
import { sha256Hex } from './normalize.js'
import type { Prepared, ProviderContext, ProviderDefinition, ProviderOutcome } from './provider.js'

export const META_AUDIENCE_BATCH_MAX = 10_000

const Settings = Type.Object({
  audienceId: Type.String({ pattern: '^[0-9]{1,32}$', description: 'The Custom Audience id (Ads Manager → Audiences), for every segment without its own.' }),
  audienceIds: Type.Optional(Type.Record(Type.String({ pattern: '^[A-Za-z0-9_.:-]{1,128}$' }), Type.String({ pattern: '^[0-9]{1,32}$' }), { maxProperties: 100, description: 'A Custom Audience id per segment.' })),
  apiVersion: Type.Optional(Type.String({ pattern: '^v[0-9]{1,3}\\.[0-9]{1,2}$' })),
})
const Credentials = Type.Object({ accessToken: Type.String({ minLength: 1, maxLength: 4096 }) }, { additionalProperties: false })

export interface MetaAudienceSettings {
  audienceId: string
  audienceIds?: Record<string, string>
  apiVersion?: string
}

export const metaAudience: ProviderDefinition<MetaAudienceSettings, { accessToken: string }> = {
  type: 'meta-audience',
  label: 'Meta Custom Audience',
  purpose: 'ads',
  takes: { events: false, audiences: true },
  needsContact: true,
  batchMax: META_AUDIENCE_BATCH_MAX,
  apiBaseUrl: 'https://graph.facebook.com',
  settings: Settings,
  credentials: Credentials,
  async send (context, batch) {
    const { adds, removes } = audienceChanges(batch)
    const notes: string[] = []
    let last: ProviderOutcome | null = null
    for (const [method, groups] of [['POST', adds], ['DELETE', removes]] as const) {
      for (const [segment, people] of groups) {
        const outcome = await sendOne(context, method, context.settings.audienceIds?.[segment] ?? context.settings.audienceId, people)
        if (outcome.outcome !== 'delivered') return outcome
        if (outcome.error !== undefined) notes.push(outcome.error)
        last = outcome
      }
    }
    const outcome = last!
    if (notes.length > 0) outcome.error = notes.join('; ')
    return outcome
  },
}

async function sendOne (context: ProviderContext<MetaAudienceSettings, { accessToken: string }>, method: 'POST' | 'DELETE', audienceId: string, people: readonly Prepared[]): Promise<ProviderOutcome> {
  const data = people.map(({ ids }) => [ids.email === null ? '' : sha256Hex(ids.email), ids.phone === null ? '' : sha256Hex(ids.phone)])
  const sessionId = sessionIdOf(people)
  const body = JSON.stringify({
    payload: { schema: ['EMAIL', 'PHONE'], data },
    session: { session_id: sessionId, batch_seq: 1, last_batch_flag: true, estimated_num_total: data.length },
  })
  const url = `${context.apiBaseUrl}/${context.settings.apiVersion ?? META_API_VERSION}/${audienceId}/users?access_token=${encodeURIComponent(context.credentials.accessToken)}`
  const answer = await context.http.call({ method, url, body }, context.timeoutMs)
  const outcome = metaOutcome(answer, `${method} ${url} ${body}`, context.nowMs())
  if (outcome.outcome === 'delivered') {
    const answered = jsonOf(answer) as { num_invalid_entries?: unknown } | null
    const invalid = typeof answered?.num_invalid_entries === 'number' ? answered.num_invalid_entries : 0
    if (invalid > 0) outcome.error = `Meta refused ${invalid} of ${data.length} ${method === 'POST' ? 'adds' : 'removes'} as invalid entries`
  }
  return outcome
}

/** A positive 53-bit session id, the same for the same people (a retry is the same session). */
function sessionIdOf (people: readonly Prepared[]): number {
  const hash = createHash('sha256')
  for (const { item } of people) hash.update(item.messageId ?? item.id).update('\n')
  return Number(BigInt('0x' + hash.digest('hex').slice(0, 13))) + 1
}
