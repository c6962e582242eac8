// A secret the admin did not send again (a webhook's "[redacted]", a destination's omitted credential)
// keeps its saved value only while requests still go to the same origin: otherwise a viewer of the
// configuration who can edit it could point it at a server of their own and receive the secret. One
// function for every configuration kind that keeps secrets.

import { ApiError, errorItem } from '../errors.js'

/**
 * Throws 400 naming every kept secret (JSON pointers) when the origin changes; a configuration saved
 * for the first time (previousOrigin null) keeps nothing, so there is nothing to refuse.
 */
export function refuseKeptSecretsOnNewOrigin (previousOrigin: string | null, nextOrigin: string, keptFields: readonly string[]): void {
  if (previousOrigin === null || previousOrigin === nextOrigin || keptFields.length === 0) return
  throw ApiError.of(keptFields.map(field => errorItem('invalid_field', field,
    `${field.slice(field.lastIndexOf('/') + 1)} must be sent again: requests now go to ${nextOrigin}, not ${previousOrigin}, and a saved secret is kept only for the origin it was entered for.`)))
}

/** The origin of a URL, or the text itself when it is not one (validation refuses it elsewhere). */
export function originOfUrl (url: string): string {
  try {
    return new URL(url).origin
  } catch {
    return url
  }
}
