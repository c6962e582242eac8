// Who a delivery is about, as the destinations send it: the email and phone read from the profile's
// (or visitor's) attributes named by the destination's settings, and the profile or visitor id as the
// external id. Normalized once here; each provider hashes (or not) as it documents.

import type { DeliveryContext } from '../webhooks/types.js'
import { normalizeEmail, normalizeExternalId, normalizePhoneDigits } from './normalize.js'

export interface IdentifierSettings {
  emailAttribute: string
  phoneAttribute: string
  /** Digits of the country code given to national phone numbers (leading 0); null: such numbers are skipped. */
  phoneCountryCode: string | null
}

export interface Identifiers {
  /** Normalized (trimmed, lower case). */
  email: string | null
  /** E.164 digits, no '+'. */
  phone: string | null
  /** The profile id, else the visitor id, normalized. */
  externalId: string | null
}

export function identifiersOf (context: DeliveryContext, settings: IdentifierSettings): Identifiers {
  const attributes = context.attributes
  return {
    email: attributes === undefined ? null : normalizeEmail(attributes[settings.emailAttribute]),
    phone: attributes === undefined ? null : normalizePhoneDigits(attributes[settings.phoneAttribute], settings.phoneCountryCode),
    externalId: normalizeExternalId(context.profileId ?? context.visitorId),
  }
}

/** Whether a person can be matched by email or phone (an external id alone matches no audience). */
export function hasContact (ids: Identifiers): boolean {
  return ids.email !== null || ids.phone !== null
}
