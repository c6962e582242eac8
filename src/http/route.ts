// One route, declared once: what the router serves (method, uWS pattern, body, role, handler: the
// `Route` of server.ts) and what GET /openapi.json says of it (`doc`: summary, request body and query,
// the success answer, the refusals). The router and the document are both made from the same list
// (src/app.ts), so a route cannot be served undocumented nor documented unserved. The router never
// reads `doc`; src/ops/openapi.ts walks it once at start.

import type { TSchema } from 'typebox'
import type { ErrorCode } from '../errors.js'
import type { Route } from './server.js'

/** The tags of the document, in its order, with their descriptions. */
export const TAGS = {
  Events: 'Fire a visitor event and get the eligible campaigns (public).',
  Profiles: 'Read and change a known person\'s attributes and segments (public, token).',
  Visitors: 'Read and change an anonymous device\'s attributes and segments (public, token).',
  Accounts: 'Tenants (admin).',
  Tokens: 'API tokens of an account (admin).',
  'Event types': 'Custom event types and their required fields (admin).',
  Campaigns: 'Campaigns answered by /campaigns/query (admin).',
  Segments: 'Manual and computed segments (admin).',
  Webhooks: 'Webhooks, their deliveries and replay (admin); see docs/webhooks.md.',
  Destinations: 'Native destinations (Meta, Google Ads, GA4, TikTok, Braze): configuration, deliveries, replay, test events (admin); see docs/destinations.md.',
  People: 'Everything held on a visitor or profile; export and erasure (admin).',
  Operations: 'Health, readiness, metrics and this document (no key).',
  Browsers: 'CORS preflights of the public endpoints and the browser SDK (docs/sdk.md).',
  Panel: 'Panel sign-in (sessions) and users of an account; see docs/panel.md for the roles.',
  Audit: 'Who changed what (owners and the admin key).',
  Media: 'Images for campaign content: uploaded by editors, served publicly at a stable URL.',
  Try: 'Trying configuration without changing anything: a campaign against an event, a webhook\'s test delivery.',
  Cluster: 'Cluster mode: its nodes and who owns which partition (admin key; served only with BEACON_CLUSTER); see docs/cluster.md.',
  'Event log': 'The retained event log of an account: read, filter, export (admin); see docs/event-log.md.',
  Reports: 'Events, unique visitors, campaign impressions, views and clicks, segment changes and deliveries per hour or day.',
} as const
export type Tag = keyof typeof TAGS

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

/**
 * What the document says of a route. Who may call it follows from the route itself: an /admin route
 * (but those of role 'public') takes the admin key or a session of its `role`; `token`: a public
 * endpoint that authenticates with the body's token. The refusals every operation shares (overload,
 * a bad body, authentication) are added by the generator; `errors` lists the route's own.
 */
export interface RouteDoc {
  summary: string
  description?: string
  tag: Tag
  token?: 'read' | 'write'
  /** The request body's schema and an example (the coverage test sends the example); `raw`: bytes of that type, not JSON. */
  body?: { schema: TSchema, example: Record<string, unknown>, raw?: string }
  query?: QueryParameter[]
  /** Request headers the operation reads (beyond authentication and content type). */
  headers?: QueryParameter[]
  /** The success answer. */
  ok: Answer
  /** Other answers that are not refusals (e.g. /readyz's 503, a 304). */
  also?: Answer[]
  /** Refusals specific to the operation. */
  errors: ErrorCode[]
}

/** A route and its documentation; `doc` null: served but deliberately not in the document (the panel's files). */
export interface RouteDefinition extends Route {
  doc: RouteDoc | null
}

export const json = (status: number, description: string, schema: TSchema): Answer => ({ status, description, schema })

/** Placeholders in examples; the coverage test replaces them with a real account, token and user. */
export const EXAMPLE_ACCOUNT = '6f1c2d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f'
export const EXAMPLE_TOKEN = 'bk_0123456789abcdef_s3cr3t'
export const EXAMPLE_VISITOR = '2b7e1b8e-7c0e-4c7e-9a4e-1b2c3d4e5f60'
export const EXAMPLE_EMAIL = 'owner@example.com'
export const EXAMPLE_PASSWORD = 'correct horse battery staple'
