// The client's errors: one class per kind, callers switch on `code` (as on the server's `errors[].code`).
// A refusal carries what the server said (status, its first code, message, every item); a request
// that got no answer carries the transport's reason. Both say how many attempts were made.

import type { ErrorCode } from '../errors.js'

/** One item of a refusal's `errors[]`, as the server sends it (src/errors.ts). */
export interface ErrorItem {
  code: ErrorCode
  field?: string
  message: string
}

/** A refusal: the server answered with a status of 400 or above. */
export class BeaconError extends Error {
  override readonly name = 'BeaconError'
  readonly status: number
  /** The first item's code (`invalid_field`, `rate_limited`, …); `http_<status>` when the body had none. */
  readonly code: ErrorCode | `http_${number}`
  readonly errors: readonly ErrorItem[]
  /** The node that answered (its base URL). */
  readonly node: string
  readonly attempts: number

  constructor (status: number, message: string, errors: readonly ErrorItem[], node: string, attempts: number) {
    super(message)
    this.status = status
    this.code = errors[0]?.code ?? `http_${status}`
    this.errors = errors
    this.node = node
    this.attempts = attempts
  }
}

/** Codes of a request that got no answer. */
export const CONNECTION_CODES = {
  /** The connection failed or broke before the answer (refused, reset, closed). */
  connection_failed: 'connection_failed',
  /** No answer within `timeoutMs`. */
  timeout: 'timeout',
  /** The answer was not the JSON the API always sends. */
  bad_answer: 'bad_answer',
} as const
export type ConnectionCode = keyof typeof CONNECTION_CODES

/** No usable answer: the node was not reached, did not answer in time, or answered something that is not the API's. */
export class BeaconConnectionError extends Error {
  override readonly name = 'BeaconConnectionError'
  readonly code: ConnectionCode
  readonly node: string
  readonly attempts: number

  constructor (code: ConnectionCode, message: string, node: string, attempts: number, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause })
    this.code = code
    this.node = node
    this.attempts = attempts
  }
}

/** A bad option given to the client's constructor or a call. */
export class InvalidArgumentError extends Error {
  override readonly name = 'InvalidArgumentError'
  readonly code = 'invalid_argument'
}
