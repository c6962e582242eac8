// The data that flows through delivery: what a transport hands in (DeliveryItem), what one HTTP
// attempt produced (SendResult), and what is kept of it (AttemptRecord).

/** The values a template can read. Everything but `account` is optional; absent renders as null / empty. */
export interface DeliveryContext {
  account: string
  profileId?: string
  visitorId?: string
  event?: string
  audience?: string
  change?: string // 'enter' | 'exit' for audience webhooks; 'erase' for audience destinations (an erased member)
  eventFields?: Record<string, unknown>
  attributes?: Record<string, unknown>
}

/** One thing to deliver. `id` is stable across attempts (the outbox / stream message id). */
export interface DeliveryItem {
  id: string
  occurredAtMs: number
  context: DeliveryContext
  /**
   * The webhook-id it is sent under when that is not `id`: in cluster mode, a row a new partition owner
   * resends after a takeover is sent under the id its first owner's delivery of it had (the record's
   * own id, `id`, names the node holding it).
   */
  messageId?: string
  /**
   * Set on a delivery made by a replay of the event log (src/jobs/replay.ts): the replay's id. Sent as
   * the `Beacon-Replay` header and readable as `{{replay}}` (docs/webhooks.md); absent on live deliveries.
   */
  replay?: string
  /**
   * A body made already, sent instead of the webhook's rendered payload: a saved report's result
   * (src/delivery/schedules.ts, docs/reports.md "Delivery to a webhook"). Absent on every other delivery.
   */
  body?: string
}

/** What is kept of one attempt: for the dead letter and for delivery history. */
export interface AttemptRecord {
  atMs: number
  status?: number
  latencyMs: number
  error?: string
}

export const OUTCOMES = ['delivered', 'retry', 'terminal'] as const
export type Outcome = typeof OUTCOMES[number]

/** Why an attempt failed without (or despite) an HTTP status; callers switch on it. */
export const SEND_ERRORS = {
  /** The receiver answered with a non-2xx status. */
  http_status: 'http_status',
  /** No answer within timeoutMs (connect, headers or body). */
  timeout: 'timeout',
  /** Connection refused or reset, DNS failure, TLS failure, proxy failure. */
  connection: 'connection',
  /** The target or the proxy is a loopback, private, link-local or metadata address (SSRF guard). */
  refused: 'refused',
  /** The request could not be built (render failure, bad header value, batch too large). */
  invalid_request: 'invalid_request',
} as const
export type SendErrorCode = keyof typeof SEND_ERRORS

export interface SendResult {
  outcome: Outcome
  /** webhook-id of the request: the item id, or the batch id (see batchIdOf). */
  deliveryId: string
  atMs: number
  status?: number
  latencyMs: number
  /** Set when the receiver asked for a delay (Retry-After on a retryable status), capped. */
  retryAfterMs?: number
  error?: string
  errorCode?: SendErrorCode
}

/**
 * A native destination's delivery (src/destinations): the webhook machinery carries its records, and
 * these replace the template rendering and the trigger. Absent on webhooks.
 */
export interface NativeDelivery {
  /** Whether an outbox row (an event, or an enter or exit) goes to it. */
  selects (row: { kind: 'event' | 'audience', event?: string, segment?: string, change?: 'enter' | 'exit' | 'erase' }): boolean
  /** One attempt of one batch; never throws. */
  send (items: readonly DeliveryItem[], timeoutMs: number): Promise<SendResult>
  /** Due times are rounded up to a multiple of this, so a batch waits at most this long for more items. */
  readonly batchWindowMs: number
}

export function attemptRecord (result: SendResult): AttemptRecord {
  const record: AttemptRecord = { atMs: result.atMs, latencyMs: result.latencyMs }
  if (result.status !== undefined) record.status = result.status
  if (result.error !== undefined) record.error = result.error
  return record
}
