// The admin API (docs/api.md, "Admin API"), with the admin key: accounts, tokens, event types,
// campaigns, segments, webhooks, visitors and profiles (read, export, erase), the event log, the
// cluster's status. Reads, PUTs and DELETEs are idempotent (retried on 503 and lost answers); the POSTs
// that create something are not (retried on 429 only: the admin API takes no Idempotency-Key).
// Listings answer a page; `all()` walks every page.

import type { Call } from './call.js'
import { InvalidArgumentError } from './errors.js'
import type * as T from './types.js'

type Send = <R>(call: Call) => Promise<R>

export class AdminApi {
  private readonly send: Send
  private readonly keyed: boolean

  constructor (send: Send, keyed: boolean) {
    this.send = send
    this.keyed = keyed
  }

  // ---- accounts ----
  createAccount (body: T.AccountCreate): Promise<T.AccountWithSecret> { return this.post('/admin/accounts', body, false) }
  listAccounts (page?: T.PageQuery): Promise<T.AccountList> { return this.get('/admin/accounts', page) }
  getAccount (account: string): Promise<T.AccountRecord> { return this.get(`/admin/accounts/${id(account)}`) }
  updateAccount (account: string, patch: T.AccountPatch): Promise<T.AccountRecord> { return this.call('PATCH', `/admin/accounts/${id(account)}`, patch, true) }
  rotateIdentitySecret (account: string, body: { graceSeconds?: number } = {}): Promise<T.AccountWithSecret> {
    return this.post(`/admin/accounts/${id(account)}/identity-secret/rotate`, body, false)
  }

  deleteAccount (account: string): Promise<T.AccountDeletion> { return this.call('DELETE', `/admin/accounts/${id(account)}`, undefined, true) }
  accountDeletion (account: string): Promise<T.AccountDeletion> { return this.get(`/admin/accounts/${id(account)}/deletion`) }

  // ---- tokens ----
  createToken (account: string, body: T.TokenCreate): Promise<T.TokenCreated> { return this.post(`/admin/accounts/${id(account)}/tokens`, body, false) }
  listTokens (account: string, page?: T.PageQuery): Promise<T.TokenList> { return this.get(`/admin/accounts/${id(account)}/tokens`, page) }
  revokeToken (account: string, tokenId: string): Promise<T.TokenRecord> { return this.call('DELETE', `/admin/accounts/${id(account)}/tokens/${id(tokenId)}`, undefined, true) }

  // ---- event types ----
  listEventTypes (account: string, page?: T.PageQuery): Promise<T.EventTypeList> { return this.get(`/admin/accounts/${id(account)}/event-types`, page) }
  putEventType (account: string, name: string, body: T.EventTypePut): Promise<T.EventType> { return this.call('PUT', `/admin/accounts/${id(account)}/event-types/${id(name)}`, body, true) }
  getEventType (account: string, name: string): Promise<T.EventType> { return this.get(`/admin/accounts/${id(account)}/event-types/${id(name)}`) }
  deleteEventType (account: string, name: string): Promise<T.NameDeleted> { return this.call('DELETE', `/admin/accounts/${id(account)}/event-types/${id(name)}`, undefined, true) }

  // ---- campaigns ----
  listCampaigns (account: string, page?: T.PageQuery): Promise<T.CampaignList> { return this.get(`/admin/accounts/${id(account)}/campaigns`, page) }
  putCampaign (account: string, campaignId: string, body: T.CampaignPut): Promise<T.Campaign> { return this.call('PUT', `/admin/accounts/${id(account)}/campaigns/${id(campaignId)}`, body, true) }
  getCampaign (account: string, campaignId: string): Promise<T.Campaign> { return this.get(`/admin/accounts/${id(account)}/campaigns/${id(campaignId)}`) }
  deleteCampaign (account: string, campaignId: string): Promise<T.IdDeleted> { return this.call('DELETE', `/admin/accounts/${id(account)}/campaigns/${id(campaignId)}`, undefined, true) }

  // ---- segments ----
  listSegments (account: string, page?: T.PageQuery): Promise<T.SegmentList> { return this.get(`/admin/accounts/${id(account)}/segments`, page) }
  putSegment (account: string, name: string, body: T.SegmentPut): Promise<T.Segment> { return this.call('PUT', `/admin/accounts/${id(account)}/segments/${id(name)}`, body, true) }
  getSegment (account: string, name: string): Promise<T.Segment> { return this.get(`/admin/accounts/${id(account)}/segments/${id(name)}`) }
  deleteSegment (account: string, name: string): Promise<T.NameDeleted> { return this.call('DELETE', `/admin/accounts/${id(account)}/segments/${id(name)}`, undefined, true) }

  // ---- webhooks ----
  listWebhooks (account: string, page?: T.PageQuery): Promise<T.WebhookList> { return this.get(`/admin/accounts/${id(account)}/webhooks`, page) }
  putWebhook (account: string, webhookId: string, body: T.WebhookPut): Promise<T.Webhook> { return this.call('PUT', `/admin/accounts/${id(account)}/webhooks/${id(webhookId)}`, body, true) }
  getWebhook (account: string, webhookId: string): Promise<T.Webhook> { return this.get(`/admin/accounts/${id(account)}/webhooks/${id(webhookId)}`) }
  deleteWebhook (account: string, webhookId: string): Promise<T.IdDeleted> { return this.call('DELETE', `/admin/accounts/${id(account)}/webhooks/${id(webhookId)}`, undefined, true) }
  webhookDeliveries (account: string, webhookId: string, query?: T.DeliveryQuery): Promise<T.DeliveryPage> {
    return this.get(`/admin/accounts/${id(account)}/webhooks/${id(webhookId)}/deliveries`, query)
  }

  /** Queues deliveries again; not idempotent (a replay twice sends twice): retried on 429 only. */
  replayWebhook (account: string, webhookId: string, body: T.WebhookReplay): Promise<T.Replayed> {
    return this.post(`/admin/accounts/${id(account)}/webhooks/${id(webhookId)}/replay`, body, false)
  }

  // ---- visitors and profiles ----
  getVisitor (account: string, visitorId: string): Promise<T.VisitorSnapshot> { return this.get(`/admin/accounts/${id(account)}/visitors/${id(visitorId)}`) }
  eraseVisitor (account: string, visitorId: string): Promise<T.VisitorErased> { return this.call('DELETE', `/admin/accounts/${id(account)}/visitors/${id(visitorId)}`, undefined, true) }
  getProfile (account: string, profileId: string): Promise<T.ProfileSnapshot> { return this.get(`/admin/accounts/${id(account)}/profiles/${id(profileId)}`) }
  exportProfile (account: string, profileId: string): Promise<T.PersonExport> { return this.get(`/admin/accounts/${id(account)}/profiles/${id(profileId)}/export`) }
  eraseProfile (account: string, profileId: string): Promise<T.Erased> { return this.call('DELETE', `/admin/accounts/${id(account)}/profiles/${id(profileId)}`, undefined, true) }

  // ---- event log, cluster ----
  /** A page of the retained event log, newest first (docs/event-log.md; 501 event_log_not_kept without a log). */
  events (account: string, query?: T.EventLogQuery): Promise<T.EventLogPage> { return this.get(`/admin/accounts/${id(account)}/events`, query) }
  clusterStatus (): Promise<T.ClusterStatus> { return this.get('/admin/cluster') }

  /** Every item of a listing, walking its pages: `all(page => admin.listCampaigns(account, page), 'campaigns')`. */
  async all<K extends string, P extends { next: unknown } & Record<K, unknown[]>> (list: (page: T.PageQuery) => Promise<P>, items: K, limit = 500): Promise<P[K]> {
    const found: unknown[] = []
    let cursor: string | undefined
    for (;;) {
      const page = await list(cursor === undefined ? { limit } : { limit, cursor })
      found.push(...page[items])
      if (typeof page.next !== 'string') return found as P[K]
      cursor = page.next
    }
  }

  private get<R> (path: string, query?: object): Promise<R> {
    return this.call('GET', path + queryString(query), undefined, true)
  }

  private post<R> (path: string, body: unknown, idempotent: boolean): Promise<R> {
    return this.call('POST', path, body, idempotent)
  }

  private call<R> (method: Call['method'], path: string, body: unknown, idempotent: boolean): Promise<R> {
    if (!this.keyed) throw new InvalidArgumentError('adminKey: the admin API needs the client\'s adminKey option')
    return this.send<R>({ method, path, body, admin: true, key: null, idempotent, idempotencyKey: null })
  }
}

/** A path segment as sent: ids and names may hold characters that mean something in a URL. */
function id (value: string): string {
  if (typeof value !== 'string' || value === '') throw new InvalidArgumentError('expected a non-empty id or name')
  return encodeURIComponent(value)
}

function queryString (query: object | undefined): string {
  if (query === undefined) return ''
  const params = new URLSearchParams()
  for (const [name, value] of Object.entries(query)) if (value !== undefined && value !== null) params.set(name, String(value))
  const text = params.toString()
  return text === '' ? '' : `?${text}`
}
