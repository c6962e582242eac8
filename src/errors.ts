// One table of every error Beacon answers with: stable code → HTTP status → default message.
// Clients and tests switch on `code`; the message is for people and may improve over time.

export const ERRORS = {
  // 400
  invalid_json: [400, 'The body is not valid JSON.'],
  invalid_field: [400, 'A field is missing or has the wrong type or format.'],
  unknown_field: [400, 'The body has a field this endpoint does not accept.'],
  forbidden_key: [400, 'Keys named __proto__, constructor or prototype are refused.'],
  unknown_event_type: [400, 'The event type is not built in and was not defined for this account.'],
  invalid_campaign: [400, 'The campaign definition is invalid.'],
  invalid_segment: [400, 'The segment definition is invalid.'],
  body_incomplete: [400, 'The connection closed before the body ended.'],
  bad_framing: [400, 'The request\'s framing is ambiguous (Transfer-Encoding, Content-Length); the connection is closed.'],
  timestamp_out_of_range: [400, 'An event\'s timestamp is more than 7 days old or more than 1 hour ahead of the server.'],
  invalid_idempotency_key: [400, 'The Idempotency-Key header must be 1 to 255 printable ASCII characters.'],
  // 401
  token_missing: [401, 'The token field is missing.'],
  token_invalid: [401, 'The token is unknown or was revoked.'],
  admin_unauthorized: [401, 'The admin API needs "Authorization: Bearer <admin key>".'],
  metrics_unauthorized: [401, 'GET /metrics needs "Authorization: Bearer <BEACON_METRICS_TOKEN>".'],
  identity_unverified: [401, 'The profileId needs a valid profileIdSignature (HMAC-SHA256 under the account\'s identity secret).'],
  invalid_credentials: [401, 'The email or the password is wrong.'],
  // 403
  attribute_forbidden: [403, 'The token does not allow this attribute.'],
  token_wrong_account: [403, 'The token belongs to another account.'],
  token_read_only: [403, 'The token may only read.'],
  token_write_only: [403, 'The token may only write.'],
  origin_not_allowed: [403, 'This browser origin is not in the account\'s allowedOrigins.'],
  browser_token_forbidden: [403, 'Token endpoints are for servers: the account does not allow browsers to call them.'],
  role_forbidden: [403, 'Your role does not allow this, or it is outside your account.'],
  csrf_refused: [403, 'A change made with a session must carry an Origin header equal to this site\'s origin.'],
  // 404
  account_not_found: [404, 'The account does not exist or is suspended.'],
  not_found: [404, 'No such path.'],
  token_not_found: [404, 'No such token.'],
  event_type_not_found: [404, 'No such event type.'],
  campaign_not_found: [404, 'No such campaign.'],
  segment_not_found: [404, 'No such segment.'],
  profile_not_found: [404, 'No such profile.'],
  visitor_not_found: [404, 'No such visitor.'],
  saved_report_not_found: [404, 'No such saved report.'],
  deletion_not_found: [404, 'This account was not deleted.'],
  webhook_not_found: [404, 'No such webhook.'],
  destination_not_found: [404, 'No such destination.'],
  user_not_found: [404, 'No such user.'],
  media_not_found: [404, 'No such media.'],
  replay_not_found: [404, 'No such replay.'],
  import_not_found: [404, 'No such import.'],
  backfill_not_found: [404, 'This segment was never backfilled.'],
  // 405
  method_not_allowed: [405, 'This path does not accept that method.'],
  // 409
  conflict: [409, 'The request conflicts with the current state.'],
  report_webhook_unusable: [409, 'A saved report\'s delivery names a webhook of the account that does not exist, is disabled, or sends no body (GET or DELETE); a report\'s result goes to an enabled POST or PUT webhook.'],
  segment_computed: [409, 'The segment is computed from its rule: it cannot be assigned or removed by hand.'],
  entity_full: [409, 'The visitor or profile is at its limit of attributes or segments.'],
  replay_target_refused: [409, 'The target cannot take a replay of events: it is disabled, or not an event webhook.'],
  replay_limit: [409, 'The account runs as many replays as it may at once.'],
  backfill_running: [409, 'A backfill of this segment runs: wait for it to end (GET …/segments/{name}/backfill) before saving the segment with another.'],
  // 422
  idempotency_key_reused: [422, 'This Idempotency-Key was used with another request: a retry must send the same body to the same endpoint.'],
  // 413
  body_too_large: [413, 'The body is larger than the limit.'],
  batch_too_large: [413, 'A batch carries at most 500 events.'],
  // 415
  unsupported_media_type: [415, 'Only application/json is accepted.'],
  media_type_unsupported: [415, 'Only PNG, JPEG, GIF and WebP images are accepted (decided by their bytes).'],
  // 429
  rate_limited: [429, 'The token sent more requests than its rate allows.'],
  // 501
  event_log_not_kept: [501, 'This server keeps no event log for this: BEACON_EVENT_RETENTION_DAYS=0 turns it off (docs/event-log.md).'],
  // 503
  reports_loading: [503, 'Saved reports\' results are not ready yet: the retained event log is still being loaded after a start (docs/reports.md); retry shortly.'],
  overloaded: [503, 'The server is at its in-flight limit; retry shortly.'],
  shutting_down: [503, 'The server is shutting down.'],
  // Cluster mode: a configuration change could not take its account's lock, or be stored or applied, in time.
  config_unavailable: [503, 'The cluster\'s configuration cannot be changed right now; retry shortly.'],
  // Cluster mode: this node lost the key's partition while writing (its changelog append was refused, or
  // never sent); nothing was stored. The request path retries it at the partition's new owner.
  partition_moved: [503, 'The partition of this visitor or profile moved to another node; retry.'],
  // Cluster mode: this node sent the write's changelog append, or its event to the event stream, but could
  // not learn whether JetStream stored it (no answer in time, NATS unreachable or electing). It may have
  // been applied: it is not retried elsewhere. Sent with Retry-After.
  write_unconfirmed: [503, 'This write was sent, but whether the cluster stored it could not be confirmed: it may have been applied. Retry with the same Idempotency-Key to apply it at most once.'],
  // Cluster mode: no node answered for the key's partition within the routing budget (it is changing
  // owner, or its owner is unreachable); nothing was acknowledged. Sent with Retry-After.
  unavailable: [503, 'No node answers for this visitor or profile right now; retry.'],
  // 501
  // Cluster mode: a read that walks many visitors (people search, recently active, segment preview)
  // is served in embedded mode only (src/jobs/people-scan.ts).
  cluster_unsupported: [501, 'This read walks the stored visitors and is not available in cluster mode.'],
  // 500
  internal: [500, 'Unexpected server error.'],
} as const satisfies Record<string, readonly [number, string]>

export type ErrorCode = keyof typeof ERRORS

export interface ErrorItem {
  code: ErrorCode
  field?: string
  message: string
}

/** A refusal with a stable code; the HTTP layer turns it into `{status, message, errors}`. */
export class ApiError extends Error {
  readonly status: number
  readonly items: ErrorItem[]
  readonly headers: Record<string, string> | null

  constructor (code: ErrorCode, message?: string, field?: string, headers: Record<string, string> | null = null) {
    const text = message ?? ERRORS[code][1]
    super(text)
    this.status = ERRORS[code][0]
    this.items = [field === undefined ? { code, message: text } : { code, field, message: text }]
    this.headers = headers
  }

  /** Many errors at once (e.g. one per bad field); the status is the first one's. */
  static of (items: ErrorItem[], message?: string): ApiError {
    const first = items[0]
    if (first === undefined) throw new TypeError('ApiError.of needs at least one item')
    const err = new ApiError(first.code, message ?? first.message, first.field)
    err.items.splice(0, 1, ...items)
    return err
  }
}

export function errorItem (code: ErrorCode, field?: string, message?: string): ErrorItem {
  const text = message ?? ERRORS[code][1]
  return field === undefined ? { code, message: text } : { code, field, message: text }
}
