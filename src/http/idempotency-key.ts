// The Idempotency-Key header of the public writes (docs/retries-and-limits.md, "Idempotent writes"): checked and turned
// into the claim the actor stores or answers from (actors/idempotent.ts). Only a request that carries the
// header pays for this (one hash of its body); one without it costs the header read in server.ts.

import { createHash } from 'node:crypto'
import { ApiError } from '../errors.js'
import { IDEMPOTENCY_KEY_MAX_CHARS, validIdempotencyKey } from '../store/idempotency.js'
import type { IdempotencyClaim } from '../../actors/idempotent.js'
import type { Reply, Request } from './server.js'

/** The response header of an answer repeated from a key's record. */
export const REPLAYED_HEADER = 'Idempotent-Replayed'

/**
 * The request's claim, or undefined without the header (an empty header counts as none). Its
 * fingerprint covers the endpoint and the body as parsed (ids in lower case): a retry must send the same.
 * A keyless request another node forwarded here claims the key that node gave it (`forwardedKey`: its
 * retries of the request carry the same), so a retry reaching this or a later owner is not applied again.
 */
export function claimOf (request: Request, pattern: string): IdempotencyClaim | undefined {
  const key = request.idempotencyKey
  if (key === '') {
    if (request.forwardedKey === '') return undefined
    return { key: request.forwardedKey, fingerprint: fingerprintOf(request, pattern), forwarded: true, replayed: false }
  }
  if (!validIdempotencyKey(key)) {
    const why = key.length > IDEMPOTENCY_KEY_MAX_CHARS ? `it has ${key.length} characters` : 'it has a character outside printable ASCII (space to ~)'
    throw new ApiError('invalid_idempotency_key', `The Idempotency-Key header must be 1 to ${IDEMPOTENCY_KEY_MAX_CHARS} printable ASCII characters; ${why}.`)
  }
  return { key, fingerprint: fingerprintOf(request, pattern), replayed: false }
}

function fingerprintOf (request: Request, pattern: string): string {
  return createHash('sha256').update(pattern).update('\n').update(JSON.stringify(request.body)).digest('base64url')
}

/**
 * The answer, marked when it was repeated from the record of the client's key. A forwarded key's replay
 * is not marked: the client sent no key, and to it this is the one answer of its request.
 */
export function answerOf (reply: Reply, claim: IdempotencyClaim | undefined): Reply {
  if (claim === undefined || !claim.replayed || claim.forwarded === true) return reply
  // Exposed to browser scripts too (CORS hides other response headers from them).
  reply.headers = { ...reply.headers, [REPLAYED_HEADER]: 'true', 'Access-Control-Expose-Headers': REPLAYED_HEADER }
  return reply
}
