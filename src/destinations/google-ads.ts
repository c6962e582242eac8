// google-ads-customer-match: Customer Match through offline user data jobs of the Google Ads API (REST).
// Per batch and per change (adds, removes: one job each): create a CUSTOMER_MATCH_USER_LIST job for the
// user list, add its operations (`create` or `remove` of userIdentifiers: hashedEmail, hashedPhoneNumber),
// with partial failure enabled, then run it. Requests carry `Authorization: Bearer <access token>`,
// `developer-token` and, for a manager account, `login-customer-id`. The access token comes from the
// OAuth2 refresh-token flow (client id, client secret, refresh token), is kept until it expires, and is
// refreshed once on a 401. Identifiers the API refuses (partialFailureError) are recorded per operation.

import Type from 'typebox'
import { jsonOf, outcomeOf } from './answers.js'
import { audienceChanges } from './audience-changes.js'
import type { ProviderAnswer, ProviderRequest } from './http.js'
import { sha256Hex } from './normalize.js'
import type { Prepared, ProviderContext, ProviderDefinition, ProviderOutcome } from './provider.js'

export const GOOGLE_ADS_BATCH_MAX = 10_000
export const GOOGLE_ADS_API_VERSION = 'v26'
export const GOOGLE_TOKEN_URL = 'https://oauth2.googleapis.com/token'
/** An access token is refreshed this long before Google says it expires. */
const TOKEN_MARGIN_MS = 60_000

const Id = Type.String({ pattern: '^[0-9]{1,20}$' })
const Settings = Type.Object({
  customerId: Type.String({ pattern: '^[0-9]{10}$', description: 'The Google Ads customer id owning the user list, 10 digits without dashes.' }),
  userListId: Type.Optional(Id),
  userListIds: Type.Optional(Type.Record(Type.String({ pattern: '^[A-Za-z0-9_.:-]{1,128}$' }), Id, { maxProperties: 100, description: 'A user list id per segment.' })),
  loginCustomerId: Type.Optional(Type.String({ pattern: '^[0-9]{10}$', description: 'The manager account id, when access goes through one.' })),
  apiVersion: Type.Optional(Type.String({ pattern: '^v[0-9]{1,3}$' })),
  tokenUrl: Type.Optional(Type.String({ pattern: '^https?://[^/?#]+(/[^?#]*)?$', maxLength: 2048, description: 'The OAuth2 token endpoint (default Google\'s); under the SSRF rules.' })),
})
const Credentials = Type.Object({
  developerToken: Type.String({ minLength: 1, maxLength: 256 }),
  clientId: Type.String({ minLength: 1, maxLength: 512 }),
  clientSecret: Type.String({ minLength: 1, maxLength: 512 }),
  refreshToken: Type.String({ minLength: 1, maxLength: 2048 }),
}, { additionalProperties: false })

export interface GoogleAdsSettings {
  customerId: string
  userListId?: string
  userListIds?: Record<string, string>
  loginCustomerId?: string
  apiVersion?: string
  tokenUrl?: string
}
interface GoogleAdsCredentials { developerToken: string, clientId: string, clientSecret: string, refreshToken: string }
type Context = ProviderContext<GoogleAdsSettings, GoogleAdsCredentials>

export const googleAdsCustomerMatch: ProviderDefinition<GoogleAdsSettings, GoogleAdsCredentials> = {
  type: 'google-ads-customer-match',
  label: 'Google Ads Customer Match',
  purpose: 'ads',
  takes: { events: false, audiences: true },
  needsContact: true,
  batchMax: GOOGLE_ADS_BATCH_MAX,
  apiBaseUrl: 'https://googleads.googleapis.com',
  settings: Settings,
  credentials: Credentials,
  extraUrls: settings => [typeof settings.tokenUrl === 'string' ? settings.tokenUrl : GOOGLE_TOKEN_URL],
  async send (context, batch) {
    const { adds, removes } = audienceChanges(batch)
    const notes: string[] = []
    let last: ProviderOutcome | null = null
    for (const [kind, groups] of [['create', adds], ['remove', removes]] as const) {
      for (const [segment, people] of groups) {
        const listId = context.settings.userListIds?.[segment] ?? context.settings.userListId
        if (listId === undefined) return { outcome: 'terminal', error: `no user list for segment ${segment}: set settings.userListId or settings.userListIds.${segment}`, request: '', answer: '' }
        const outcome = await runJob(context, kind, listId, people)
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

/** Google's normalization for Customer Match emails: trimmed, lower case, no dots before @gmail.com / @googlemail.com. */
export function googleEmail (email: string): string {
  const at = email.lastIndexOf('@')
  const domain = email.slice(at + 1)
  return domain === 'gmail.com' || domain === 'googlemail.com' ? email.slice(0, at).replace(/\./g, '') + email.slice(at) : email
}

function identifiersOf ({ ids }: Prepared): Array<Record<string, string>> {
  const identifiers: Array<Record<string, string>> = []
  if (ids.email !== null) identifiers.push({ hashedEmail: sha256Hex(googleEmail(ids.email)) })
  if (ids.phone !== null) identifiers.push({ hashedPhoneNumber: sha256Hex('+' + ids.phone) })
  return identifiers
}

async function runJob (context: Context, kind: 'create' | 'remove', listId: string, people: readonly Prepared[]): Promise<ProviderOutcome> {
  const { customerId } = context.settings
  const base = `${context.apiBaseUrl}/${context.settings.apiVersion ?? GOOGLE_ADS_API_VERSION}`
  const created = await call(context, { method: 'POST', url: `${base}/customers/${customerId}/offlineUserDataJobs:create`, body: JSON.stringify({ job: { type: 'CUSTOMER_MATCH_USER_LIST', customerMatchUserListMetadata: { userList: `customers/${customerId}/userLists/${listId}` } } }) })
  if (created.outcome.outcome !== 'delivered') return created.outcome
  const job = (jsonOf(created.answer!) as { resourceName?: unknown } | null)?.resourceName
  if (typeof job !== 'string' || !/^customers\/[0-9]+\/offlineUserDataJobs\/[0-9]+$/.test(job)) return { ...created.outcome, outcome: 'retry', error: 'Google Ads created no job resource name' }
  const operations = people.map(person => ({ [kind]: { userIdentifiers: identifiersOf(person) } }))
  const added = await call(context, { method: 'POST', url: `${base}/${job}:addOperations`, body: JSON.stringify({ enablePartialFailure: true, operations }) })
  if (added.outcome.outcome !== 'delivered') return added.outcome
  const refused = partialFailures(added.answer!)
  const ran = await call(context, { method: 'POST', url: `${base}/${job}:run`, body: '{}' })
  if (ran.outcome.outcome === 'delivered' && refused.length > 0) {
    ran.outcome.error = `Google Ads refused ${refused.length} of ${operations.length} ${kind === 'create' ? 'adds' : 'removes'}: ${refused.slice(0, 5).join('; ')}`
  }
  return ran.outcome
}

/** The operations partialFailureError names: "operations[3]: <message>". */
function partialFailures (answer: ProviderAnswer): string[] {
  const failure = (jsonOf(answer) as { partialFailureError?: { details?: Array<{ errors?: Array<{ message?: string, location?: { fieldPathElements?: Array<{ fieldName?: string, index?: number }> } }> }> } } | null)?.partialFailureError
  const found: string[] = []
  for (const detail of failure?.details ?? []) {
    for (const error of detail.errors ?? []) {
      const path = (error.location?.fieldPathElements ?? []).map(element => element.index === undefined ? element.fieldName : `${element.fieldName}[${element.index}]`).join('.')
      found.push(`${path}: ${error.message ?? 'refused'}`)
    }
  }
  return found
}

/** One API call with a valid access token: refreshed when missing or expired, and once again on a 401. */
async function call (context: Context, request: ProviderRequest): Promise<{ outcome: ProviderOutcome, answer: ProviderAnswer | null }> {
  for (let attempt = 0; attempt < 2; attempt++) {
    const token = await accessToken(context, attempt > 0)
    if (typeof token !== 'string') return { outcome: token, answer: null }
    const headers: Record<string, string> = { authorization: `Bearer ${token}`, 'developer-token': context.credentials.developerToken }
    if (context.settings.loginCustomerId !== undefined) headers['login-customer-id'] = context.settings.loginCustomerId
    const answer = await context.http.call({ ...request, headers }, context.timeoutMs)
    if (answer.status === 401 && attempt === 0) continue
    return { outcome: googleOutcome(answer, `${request.method} ${request.url} ${request.body ?? ''}`, context.nowMs()), answer }
  }
  throw new Error('unreachable')
}

/** The cached access token, or a new one from the refresh token; an outcome when the token endpoint refuses. */
async function accessToken (context: Context, refresh: boolean): Promise<string | ProviderOutcome> {
  const cached = context.state.accessToken as { token: string, expiresAtMs: number } | undefined
  if (!refresh && cached !== undefined && cached.expiresAtMs > context.nowMs()) return cached.token
  const { clientId, clientSecret, refreshToken } = context.credentials
  const body = new URLSearchParams({ grant_type: 'refresh_token', client_id: clientId, client_secret: clientSecret, refresh_token: refreshToken }).toString()
  const url = context.settings.tokenUrl ?? GOOGLE_TOKEN_URL
  const answer = await context.http.call({ method: 'POST', url, headers: { 'content-type': 'application/x-www-form-urlencoded' }, body }, context.timeoutMs)
  const granted = jsonOf(answer) as { access_token?: unknown, expires_in?: unknown, error?: unknown, error_description?: unknown } | null
  if (answer.status === 200 && typeof granted?.access_token === 'string') {
    const expiresInMs = (typeof granted.expires_in === 'number' ? granted.expires_in : 3600) * 1000
    context.state.accessToken = { token: granted.access_token, expiresAtMs: context.nowMs() + expiresInMs - TOKEN_MARGIN_MS }
    return granted.access_token
  }
  delete context.state.accessToken
  const why = `OAuth token refresh failed: HTTP ${answer.status} ${typeof granted?.error === 'string' ? granted.error : ''} ${typeof granted?.error_description === 'string' ? granted.error_description : ''}`.trim()
  // invalid_grant: the refresh token was revoked or expired; the admin must authorize again.
  return outcomeOf(answer, `POST ${url} grant_type=refresh_token`, context.nowMs(), granted?.error === 'invalid_grant' ? `${why}; authorize again and save a new refresh token` : why)
}

/** Google's errors: RESOURCE_EXHAUSTED (429) and the 5xx are retried; CONCURRENT_MODIFICATION too (another job on the list). */
function googleOutcome (answer: ProviderAnswer, request: string, nowMs: number): ProviderOutcome {
  if (answer.status >= 200 && answer.status < 300) return outcomeOf(answer, request, nowMs)
  const error = (jsonOf(answer) as { error?: { status?: unknown, message?: unknown } } | null)?.error
  const status = typeof error?.status === 'string' ? error.status : ''
  const message = `HTTP ${answer.status}${status === '' ? '' : ' ' + status}: ${typeof error?.message === 'string' ? error.message : answer.body.slice(0, 300)}`
  return outcomeOf(answer, request, nowMs, message, answer.body.includes('CONCURRENT_MODIFICATION'))
}
