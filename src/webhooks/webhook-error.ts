// Errors the library throws at its callers (never at the network): one class, a stable code each.
// Callers switch on `err.code`.

export const WEBHOOK_ERRORS = {
  /** enqueue would take the worker past its queue limit; nothing of the call was queued. */
  queue_full: 'webhook_queue_full',
  /** enqueue after stop(). */
  stopped: 'webhook_worker_stopped',
  /** A retry group larger than the webhook's batch size, or an empty group. */
  invalid_batch: 'webhook_invalid_batch',
  /** A template failed to compile (unknown placeholder, unclosed braces, …). */
  invalid_template: 'webhook_invalid_template',
  /** A url placeholder rendered a dot segment ("." or ".."): the request would leave its path. */
  dot_segment: 'webhook_dot_segment',
} as const
export type WebhookErrorCode = typeof WEBHOOK_ERRORS[keyof typeof WEBHOOK_ERRORS]

export class WebhookError extends Error {
  readonly code: WebhookErrorCode
  constructor (code: WebhookErrorCode, message: string) {
    super(message)
    this.name = 'WebhookError'
    this.code = code
  }
}
