// Google Ads double: the OAuth2 token endpoint (POST /token, grant_type=refresh_token) and the
// offline user data jobs of the Google Ads API REST interface, checked as Google documents them:
// `Authorization: Bearer` with a token it issued and that has not expired, `developer-token`; jobs of
// type CUSTOMER_MATCH_USER_LIST naming an existing user list; addOperations with `create` or `remove`
// operations of userIdentifiers (hashedEmail / hashedPhoneNumber: 64-digit lower-case SHA-256 hex), at
// most 100,000 a request and 20 identifiers an operation; with enablePartialFailure the refused
// operations are reported in partialFailureError (per operation index), without it the request fails;
// run starts the job once. Members of each list are kept by identifier.

import { HttpDouble, parseJson, SHA256, type DoubleReply, type DoubleRequest } from './http-double.js'

interface Job { list: string, operations: Array<{ kind: 'create' | 'remove', ids: string[] }>, ran: boolean }

export class GoogleAdsDouble extends HttpDouble {
  readonly lists = new Map<string, Set<string>>()
  readonly jobs = new Map<string, Job>()
  readonly tokensIssued: string[] = []
  /** Hashed identifiers refused as invalid (a partial failure). */
  readonly refusedIdentifiers = new Set<string>()
  refreshToken = 'g-refresh'
  developerToken = 'g-dev'
  private readonly expiresAt = new Map<string, number>()
  private nextJob = 1

  constructor (nowMs: () => number = Date.now) {
    super(request => this.answer(request), nowMs)
    this.lists.set('customers/1234567890/userLists/555', new Set())
  }

  /** Every issued token expires now: the next call is 401 UNAUTHENTICATED. */
  expireTokens (): void {
    for (const token of this.expiresAt.keys()) this.expiresAt.set(token, 0)
  }

  members (list = 'customers/1234567890/userLists/555'): string[] {
    return [...this.lists.get(list) ?? []].sort()
  }

  private answer (request: DoubleRequest): DoubleReply {
    if (request.path === '/token') return this.token(request)
    const auth = String(request.headers.authorization ?? '')
    const token = auth.replace(/^Bearer /, '')
    const expires = this.expiresAt.get(token)
    if (!auth.startsWith('Bearer ') || expires === undefined || expires <= this.nowMs()) return googleError(401, 'UNAUTHENTICATED', 'Request had invalid authentication credentials.')
    if (request.headers['developer-token'] !== this.developerToken) return googleError(401, 'UNAUTHENTICATED', 'The developer token is not valid.')
    const body = parseJson(request.body) as Record<string, any> | undefined
    if (request.method !== 'POST' || body === undefined) return googleError(400, 'INVALID_ARGUMENT', 'Invalid JSON payload.')
    let match = /^\/v[0-9]+\/customers\/([0-9]{10})\/offlineUserDataJobs:create$/.exec(request.path)
    if (match !== null) {
      const list = body.job?.customerMatchUserListMetadata?.userList
      if (body.job?.type !== 'CUSTOMER_MATCH_USER_LIST') return googleError(400, 'INVALID_ARGUMENT', 'job.type must be CUSTOMER_MATCH_USER_LIST.')
      if (typeof list !== 'string' || !this.lists.has(list)) return googleError(400, 'INVALID_ARGUMENT', `user list ${String(list)} not found`)
      const name = `customers/${match[1]}/offlineUserDataJobs/${this.nextJob++}`
      this.jobs.set(name, { list, operations: [], ran: false })
      return { status: 200, body: { resourceName: name } }
    }
    match = /^\/v[0-9]+\/(customers\/[0-9]+\/offlineUserDataJobs\/[0-9]+):(addOperations|run)$/.exec(request.path)
    const job = match === null ? undefined : this.jobs.get(match[1]!)
    if (match === null || job === undefined) return googleError(404, 'NOT_FOUND', `no ${request.path}`)
    if (job.ran) return googleError(400, 'FAILED_PRECONDITION', 'The job has been run already.')
    if (match[2] === 'run') {
      job.ran = true
      const members = this.lists.get(job.list)!
      for (const operation of job.operations) for (const id of operation.ids) operation.kind === 'create' ? members.add(id) : members.delete(id)
      return { status: 200, body: { name: `operations/${match[1]}` } }
    }
    const operations = body.operations
    if (!Array.isArray(operations) || operations.length === 0) return googleError(400, 'INVALID_ARGUMENT', 'operations is required.')
    if (operations.length > 100_000) return googleError(400, 'INVALID_ARGUMENT', 'Too many operations.')
    const errors: unknown[] = []
    for (const [index, operation] of operations.entries()) {
      const kind = operation.create !== undefined ? 'create' : operation.remove !== undefined ? 'remove' : null
      const ids = (operation.create ?? operation.remove)?.userIdentifiers
      if (kind === null || !Array.isArray(ids) || ids.length === 0 || ids.length > 20) return googleError(400, 'INVALID_ARGUMENT', `operations[${index}] needs create or remove with 1 to 20 userIdentifiers.`)
      const values: string[] = []
      let refused = false
      for (const id of ids) {
        const value = id.hashedEmail ?? id.hashedPhoneNumber
        if (typeof value !== 'string' || Object.keys(id).length !== 1) return googleError(400, 'INVALID_ARGUMENT', `operations[${index}]: one identifier an entry`)
        if (!SHA256.test(value) || this.refusedIdentifiers.has(value)) refused = true
        values.push(value)
      }
      if (refused) {
        if (body.enablePartialFailure !== true) return googleError(400, 'INVALID_ARGUMENT', 'Invalid SHA256 hash.')
        errors.push({ errorCode: { offlineUserDataJobError: 'INVALID_SHA256_FORMAT' }, message: 'The SHA256 encoded value is malformed.', location: { fieldPathElements: [{ fieldName: 'operations', index }, { fieldName: kind }] } })
        continue
      }
      job.operations.push({ kind, ids: values })
    }
    return { status: 200, body: errors.length === 0 ? {} : { partialFailureError: { code: 3, message: 'Some operations failed.', details: [{ '@type': 'type.googleapis.com/google.ads.googleads.v26.errors.GoogleAdsFailure', errors }] } } }
  }

  private token (request: DoubleRequest): DoubleReply {
    const form = new URLSearchParams(request.body)
    if (request.headers['content-type'] !== 'application/x-www-form-urlencoded') return { status: 400, body: { error: 'invalid_request', error_description: 'form body expected' } }
    if (form.get('grant_type') !== 'refresh_token' || form.get('client_id') !== 'g-client' || form.get('client_secret') !== 'g-secret') return { status: 401, body: { error: 'invalid_client' } }
    if (form.get('refresh_token') !== this.refreshToken) return { status: 400, body: { error: 'invalid_grant', error_description: 'Token has been expired or revoked.' } }
    const token = `ya29.token-${this.tokensIssued.length + 1}`
    this.tokensIssued.push(token)
    this.expiresAt.set(token, this.nowMs() + 3_599_000)
    return { status: 200, body: { access_token: token, expires_in: 3599, token_type: 'Bearer', scope: 'https://www.googleapis.com/auth/adwords' } }
  }
}

function googleError (code: number, status: string, message: string): DoubleReply {
  return { status: code, body: { error: { code, message, status } } }
}
