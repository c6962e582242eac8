// A client may send a stored secret back as "[redacted]" to keep it (GET never shows secrets), but only
// while the secret still goes where it went: the target's origin (scheme, host, port) and its proxy
// unchanged. Otherwise whoever may edit a webhook (an editor) could point it at their own server with
// the secrets left "[redacted]" and receive what they were never shown (issue 27). A new origin or
// proxy needs the secrets entered again: 400 invalid_field naming each one. The rule is the same for
// every configuration kind that keeps credentials for a target (webhooks, destinations).

import { ApiError, errorItem } from '../errors.js'

/** Where a configuration's secrets are sent: its URL (placeholders allowed after the origin) and proxy. */
export interface SecretTarget {
  url: unknown
  proxy?: unknown
}

/** The origin of a URL (placeholders dropped first), or null when it is not one. */
export function originOf (url: unknown): string | null {
  if (typeof url !== 'string') return null
  try {
    return new URL(url.replace(/\{\{[^}]*\}\}/g, '')).origin
  } catch {
    return null
  }
}

/** Whether secrets kept for `before` may go to `after`: the same origin and the same proxy (or none). */
export function sameTarget (before: SecretTarget, after: SecretTarget): boolean {
  const origin = originOf(before.url)
  if (origin === null || origin !== originOf(after.url)) return false
  if (before.proxy === undefined || after.proxy === undefined) return before.proxy === after.proxy
  return originOf(before.proxy) !== null && originOf(before.proxy) === originOf(after.proxy)
}

/**
 * Refuses secrets kept as "[redacted]" (`kept`: their JSON pointers in the body) when the target moved.
 * An invalid new URL is left to the configuration's own validation (it is refused there).
 */
export function assertSecretsMayStay (kept: readonly string[], before: SecretTarget, after: SecretTarget): void {
  if (kept.length === 0 || originOf(after.url) === null || sameTarget(before, after)) return
  throw ApiError.of(kept.map(field => errorItem('invalid_field', field,
    `${field.slice(1)} is "[redacted]" but the target's origin or proxy changed: enter the secret again (a kept secret only goes to the origin it was set for).`)))
}
