// Normalization and SHA-256 hashing of personal identifiers, as the ad platforms match them. Every
// provider asks for the same steps on an email (trim, lower-case) and for a phone in E.164 (a country
// code, digits only); they differ only in whether the phone keeps its '+' before hashing (Meta: no;
// Google Ads and TikTok: yes). docs/destinations.md lists the published examples the tests check.

import { createHash } from 'node:crypto'

/** A SHA-256 digest as the providers take it: 64 lower-case hex digits. */
export const SHA256_HEX = /^[0-9a-f]{64}$/

export function sha256Hex (text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex')
}

/** Trimmed and lower-cased; null when it cannot be an address (no '@' between two non-empty parts). */
export function normalizeEmail (raw: unknown): string | null {
  if (typeof raw !== 'string') return null
  const email = raw.trim().toLowerCase()
  const at = email.indexOf('@')
  if (at <= 0 || at === email.length - 1 || email.includes(' ')) return null
  return email
}

/**
 * A phone number in E.164 digits (no '+'): punctuation and spaces dropped, an international '00' prefix
 * read as '+'. A national number (no '+' or '00', leading 0) takes `countryCode` (digits, e.g. "44")
 * in place of its leading 0; without one it cannot be placed and is null. Null also when the result
 * is not 7 to 15 digits (E.164's bounds with a country code).
 */
export function normalizePhoneDigits (raw: unknown, countryCode: string | null = null): string | null {
  if (typeof raw !== 'string' && typeof raw !== 'number') return null
  const text = String(raw).trim()
  if (text === '') return null
  let digits = text.replace(/[^0-9]/g, '')
  const international = text.startsWith('+')
  if (!international) {
    if (digits.startsWith('00')) {
      digits = digits.slice(2)
    } else if (digits.startsWith('0')) {
      if (countryCode === null) return null
      digits = countryCode + digits.replace(/^0+/, '')
    } else if (countryCode !== null && !digits.startsWith(countryCode)) {
      digits = countryCode + digits
    }
  }
  if (digits.length < 7 || digits.length > 15 || digits.startsWith('0')) return null
  return digits
}

/** E.164 with its '+' (Google Ads, TikTok). */
export function normalizePhoneE164 (raw: unknown, countryCode: string | null = null): string | null {
  const digits = normalizePhoneDigits(raw, countryCode)
  return digits === null ? null : '+' + digits
}

/** An external id as Meta and TikTok recommend hashing it: trimmed, lower-cased. */
export function normalizeExternalId (raw: unknown): string | null {
  if (typeof raw !== 'string' && typeof raw !== 'number') return null
  const id = String(raw).trim().toLowerCase()
  return id === '' ? null : id
}
