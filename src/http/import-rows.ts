// The rows of a bulk import (docs/events.md, "Bulk import"): one JSON object a line, told apart by
// `type`. Each line is checked on its own, as the live endpoints check the same data: a profile's or a
// visitor's attributes as PUT …/attributes takes them, a link (no signature: the import is
// admin-authenticated), an event as /campaigns/query takes it (its type defined, its required fields,
// its custom-field limit) with its historical `timestamp` (any age, at most 1 hour ahead). A refused
// line refuses no other: its reason goes to the job's refusals with its line number.

import Type, { type TSchema } from 'typebox'
import { NAME_PATTERN } from '../patterns.js'
import { ApiError, type ErrorItem } from '../errors.js'
import type { Catalogs } from '../catalog/catalogs.js'
import type { Clock } from '../clock.js'
import type { EventBody } from '../../actors/visitor.js'
import type { ImportRow, RowParser } from '../jobs/import-jobs.js'
import { parseIsoMs } from '../matching/iso-time.js'
import { fieldsExcept } from '../fields-except.js'
import { validator } from '../validator.js'
import { TIMESTAMP_AHEAD_MAX_MS } from './event-batch.js'
import { checkEventFields } from './public-routes.js'
import { checkForbiddenKeys } from './validate.js'
import * as S from './schemas.js'

const MessageId = S.BatchEvent.properties.messageId
const { token: _token, profileIdSignature: _signature, timestamp: _timestamp, ...EVENT_PROPERTIES } = S.BatchEvent.properties

export const ProfileRow = Type.Object({
  type: Type.Literal('profile'), profileId: S.ProfileAttributes.properties.profileId, attributes: S.ProfileAttributes.properties.attributes, messageId: MessageId,
}, { additionalProperties: false })
export const VisitorRow = Type.Object({
  type: Type.Literal('visitor'), visitorId: S.VisitorAttributes.properties.visitorId, attributes: S.VisitorAttributes.properties.attributes, messageId: MessageId,
}, { additionalProperties: false })
export const LinkRow = Type.Object({
  type: Type.Literal('link'), visitorId: S.VisitorAttributes.properties.visitorId, profileId: S.ProfileAttributes.properties.profileId, messageId: MessageId,
}, { additionalProperties: false })
export const EventRow = Type.Object({
  type: Type.Literal('event'),
  ...EVENT_PROPERTIES,
  timestamp: Type.String({ maxLength: 64, description: 'When the event happened (ISO 8601 with a time zone): any age, at most 1 hour ahead of the server.' }),
}, {
  // As BatchEvent's (custom fields, names), one property more: the type.
  additionalProperties: (S.BatchEvent as unknown as { additionalProperties: TSchema }).additionalProperties,
  maxProperties: 21 + S.LIMITS.customFieldsMax,
  propertyNames: { pattern: NAME_PATTERN },
})

const validate = {
  profile: validator(ProfileRow),
  visitor: validator(VisitorRow),
  link: validator(LinkRow),
  event: validator(EventRow),
}

/** The fields of an event row that are the row's, not the event's. */
const ROW_ONLY: ReadonlySet<string> = new Set(['type', 'messageId', 'timestamp'])

export function importRowParser (catalogs: Catalogs, clock: Clock): RowParser {
  return (account, text) => {
    try {
      return parse(account, text)
    } catch (error) {
      if (error instanceof ApiError) return error.items[0]!
      throw error
    }
  }

  function parse (account: string, text: string): ImportRow | ErrorItem {
    let body: unknown
    try {
      body = JSON.parse(text)
    } catch {
      return { code: 'invalid_json', message: 'The line is not valid JSON.' }
    }
    if (typeof body !== 'object' || body === null || Array.isArray(body)) return { code: 'invalid_json', message: 'The line must be a JSON object.' }
    checkForbiddenKeys(text, body)
    const raw = body as Record<string, unknown>
    // UUIDs have one spelling (as the live endpoints take them).
    if (typeof raw.visitorId === 'string') raw.visitorId = raw.visitorId.toLowerCase()
    switch (raw.type) {
      case 'profile': {
        const row = validate.profile(raw)
        return { type: 'profile', profileId: row.profileId, attributes: row.attributes, ...messageIdOf(row.messageId) }
      }
      case 'visitor': {
        const row = validate.visitor(raw)
        return { type: 'visitor', visitorId: row.visitorId, attributes: row.attributes, ...messageIdOf(row.messageId) }
      }
      case 'link': {
        const row = validate.link(raw)
        return { type: 'link', visitorId: row.visitorId, profileId: row.profileId, ...messageIdOf(row.messageId) }
      }
      case 'event': {
        const row = validate.event(raw)
        const { messageId, timestamp } = row
        const atMs = parseIsoMs(timestamp)
        if (atMs === null) return { code: 'invalid_field', field: '/timestamp', message: 'timestamp: expected an ISO 8601 instant with a time zone, like 2026-11-27T06:00:00Z.' }
        if (atMs > clock.nowMs() + TIMESTAMP_AHEAD_MAX_MS) return { code: 'timestamp_out_of_range', field: '/timestamp', message: `The event's timestamp ${timestamp} is more than 1 hour ahead of the server's clock.` }
        const event = fieldsExcept(row, ROW_ONLY) as unknown as EventBody
        event.account = account
        checkEventFields(catalogs, event)
        // Kept on the event (a delivered import's webhooks see it), beside its custom fields rather than among them.
        event.timestamp = timestamp
        return { type: 'event', event, atMs, ...messageIdOf(messageId) }
      }
      default:
        return { code: 'invalid_field', field: '/type', message: 'type must be one of profile, visitor, link, event.' }
    }
  }
}

function messageIdOf (messageId: string | undefined): { messageId?: string } {
  return messageId === undefined ? {} : { messageId }
}
