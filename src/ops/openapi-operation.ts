// The shape of one operation of the OpenAPI document, shared by the files that describe them
// (openapi.ts, openapi-panel.ts); `T` is the set of tags the describing file may use.

import type { TSchema } from 'typebox'
import type { ErrorCode } from '../errors.js'

export type Auth = 'admin' | 'token-read' | 'token-write' | 'none'

export interface Answer {
  status: number
  description: string
  /** Absent, or contentType null: no body (204). */
  schema?: TSchema
  /** Default application/json. */
  contentType?: string | null
}

export interface QueryParameter {
  name: string
  description: string
  schema: TSchema
}

export interface Operation<T extends string = string> {
  summary: string
  description?: string
  tag: T
  auth: Auth
  /** The request body's schema and an example (the coverage test sends the example); `raw`: bytes of that type, not JSON. */
  body?: { schema: TSchema, example: Record<string, unknown>, raw?: string }
  query?: QueryParameter[]
  /** The success answer. */
  ok: Answer
  /** Other answers that are not refusals (e.g. /readyz's 503). */
  also?: Answer[]
  /** Refusals specific to the operation; the common ones follow from auth and body. */
  errors: ErrorCode[]
}
