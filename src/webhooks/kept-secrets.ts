// A secret the admin did not send again (a webhook's "[redacted]", a destination's omitted credential)
// keeps its saved value only while it still goes where it went: the same origins (scheme, host, port) of
// every URL it is sent to (a webhook's target and proxy; a destination's API and token endpoint).
// Otherwise whoever may edit the configuration (an editor) could point it at a server of their own and
// receive what they were never shown (issue 27). A new target needs the secrets entered again: 400
// invalid_field naming each one. One rule for every configuration kind that keeps secrets.

import { ApiError, errorItem } from '../errors.js'

/** The origin of a URL (`{{…}}` placeholders dropped first), or null when it is not one. */
export function originOf (url: unknown): string | null {
  if (typeof url !== 'string') return null
  try {
    return new URL(url.replace(/\{\{[^}]*\}\}/g, '')).origin
  } catch {
    return null
  }
}

/**
 * Where secrets go, as one comparable text: the origins of the URLs in order (undefined or null: none,
 * e.g. no proxy). Null when one of them is not a URL (the configuration's own validation refuses it).
 */
export function secretsTarget (urls: readonly unknown[]): string | null {
  const origins: string[] = []
  for (const url of urls) {
    if (url === undefined || url === null) {
      origins.push('none')
      continue
    }
    const origin = originOf(url)
    if (origin === null) return null
    origins.push(origin)
  }
  return origins.join(' and ')
}

/**
 * Refuses the kept secrets (`kept`: their JSON pointers in the body) when their target moved. A first
 * save (`before` null) keeps nothing; an invalid new target is left to the configuration's validation.
 */
export function refuseKeptSecretsOnNewTarget (kept: readonly string[], before: string | null, after: string | null): void {
  if (kept.length === 0 || after === null || before === after) return
  throw ApiError.of(kept.map(field => errorItem('invalid_field', field,
    `${field.slice(field.lastIndexOf('/') + 1)} was kept from the saved configuration, but requests now go to ${after}` +
    `${before === null ? '' : `, not ${before}`}: enter it again (a saved secret only goes where it was entered for).`)))
}
