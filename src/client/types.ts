// The types of the client's calls, taken from the route schemas themselves (TypeBox `Static<>` of the
// request schemas of src/http/schemas.ts and the answer schemas of src/http/reply-schemas.ts), so a
// field added to a route reaches the client's types without a second copy. Type imports only: the
// client loads none of the server's code.

import type { Static } from 'typebox'
import type * as S from '../http/schemas.js'
import type * as R from '../http/reply-schemas.js'
import type { WebhookConfig } from '../webhooks/config.js'

/** A request body whose `account` (and `token`) the client fills in from its options when absent. */
export type Defaulted<T> = Omit<T, 'account' | 'token'> & { account?: string, token?: string }

// ---- public API: requests ----
export type EventRequest = Defaulted<Static<typeof S.EventRequest>>
export type BatchEvent = Static<typeof S.BatchEvent>
export type EventBatch = Defaulted<Static<typeof S.EventBatchDocumented>>
export type VisitorQuery = Defaulted<Static<typeof S.VisitorQuery>>
export type ProfileQuery = Defaulted<Static<typeof S.ProfileQuery>>
export type VisitorAttributes = Defaulted<Static<typeof S.VisitorAttributes>>
export type ProfileAttributes = Defaulted<Static<typeof S.ProfileAttributes>>
export type VisitorSegments = Defaulted<Static<typeof S.VisitorSegments>>
export type ProfileSegments = Defaulted<Static<typeof S.ProfileSegments>>
/** An identify: an event carrying the profileId and its signature (docs/api.md, "Identity"). */
export type IdentifyRequest = EventRequest & { profileId: string, profileIdSignature: string }

// ---- public API: answers ----
export type CampaignsAnswer = Static<typeof R.CampaignsAnswer>
export type BatchAnswer = Static<typeof R.BatchAnswer>
export type EntityAnswer = Static<typeof R.EntityAnswer>
/** A saved write (R.savedAnswer): the entity's id field beside the status, message and empty errors. */
type Saved = Pick<EntityAnswer, 'status' | 'message' | 'errors'>
export type VisitorSaved = Saved & { visitorId: string }
export type ProfileSaved = Saved & { profileId: string }
export type VisitorSegmentsSaved = VisitorSaved & { segments?: string[] }
export type ProfileSegmentsSaved = ProfileSaved & { segments?: string[] }

// ---- admin API ----
export type AccountCreate = Static<typeof S.AccountCreate>
export type AccountPatch = Static<typeof S.AccountPatch>
export type AccountRecord = Static<typeof R.AccountRecord>
export type AccountWithSecret = Static<typeof R.AccountWithSecret>
export type AccountList = Static<typeof R.AccountList>
export type AccountDeletion = Static<typeof R.AccountDeletion>
export type TokenCreate = Static<typeof S.TokenCreate>
export type TokenRecord = Static<typeof R.TokenRecord>
export type TokenCreated = Static<typeof R.TokenCreated>
export type TokenList = Static<typeof R.TokenList>
export type EventTypePut = Static<typeof S.EventTypePut>
export type EventType = Static<typeof R.EventType>
export type EventTypeList = Static<typeof R.EventTypeList>
export type CampaignPut = Static<typeof R.CampaignPut>
export type Campaign = Static<typeof R.Campaign>
export type CampaignList = Static<typeof R.CampaignList>
export type SegmentPut = Static<typeof R.SegmentPut>
export type Segment = Static<typeof R.Segment>
export type SegmentList = Static<typeof R.SegmentList>
export type WebhookPut = WebhookConfig
/** A webhook as read (R.webhookAnswer): its id beside the configuration, secrets reading "[redacted]". */
export type Webhook = { id: string } & WebhookConfig
export interface WebhookList { webhooks: Webhook[], next: string | null }
export type WebhookReplay = Static<typeof S.WebhookReplay>
export type DeliveryPage = Static<typeof R.DeliveryPage>
export type Replayed = Static<typeof R.Replayed>
export type NameDeleted = Static<typeof R.NameDeleted>
export type IdDeleted = Static<typeof R.IdDeleted>
export type VisitorSnapshot = Static<typeof R.VisitorSnapshot>
export type ProfileSnapshot = Static<typeof R.ProfileSnapshot>
export type PersonExport = Static<typeof R.PersonExport>
export type Erased = Static<typeof R.Erased>
export type VisitorErased = Static<typeof R.VisitorErased>
export type EventLogPage = Static<typeof R.EventLogPage>
export type ClusterStatus = Static<typeof R.ClusterStatus>

/** A page of a listing: at most `limit` items after `cursor` (the previous page's `next`). */
export interface PageQuery {
  limit?: number
  cursor?: string
}

/** The event log's filters (docs/event-log.md). */
export interface EventLogQuery extends PageQuery {
  from?: string
  to?: string
  visitorId?: string
  profileId?: string
  kind?: string
}

/** GET …/webhooks/{id}/deliveries (docs/webhooks.md). */
export interface DeliveryQuery {
  status?: 'pending' | 'failed' | 'delivered' | 'dead'
  limit?: number
  after?: string | number
}

/** GET /cluster/routes: which node owns each partition, and where each node is. */
export type { RouteMapAnswer } from '../cluster/route-map.js'
