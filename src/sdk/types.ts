// What the SDK's callers see.

export interface Campaign {
  id: string
  name: string
  priority: number
  content: unknown
}

export interface BeaconError {
  /** The server's error code (identity_unverified, origin_not_allowed, …), or network_error, queue_full, sdk_error. */
  code: string
  message: string
}

export interface InitOptions {
  /** Beacon's base URL, e.g. https://beacon.shop.example */
  endpoint: string
  /** The account id (UUID). */
  account: string
  /** Platform code of the site (default "web"). */
  platform?: string
  device?: 'desktop' | 'tablet' | 'mobile'
  /** false: nothing is stored or sent until consent(true) (default true). */
  consent?: boolean
  /** Render campaigns into [data-beacon-slot] elements (default true). */
  render?: boolean
  /** Events kept while offline or failing (default 100); beyond it the oldest is dropped. */
  queueMax?: number
  /** How long events that need no campaign answer wait to go out together to /events/batch, in ms (default 300). */
  batchDelayMs?: number
  /** At most this many events a batch (default 50, at most 500); a full batch goes out at once. */
  batchMax?: number
  /** Told of refusals and dropped events; never thrown. */
  onError?: (error: BeaconError) => void
}

export type Fields = Record<string, unknown>
/** track()'s options: `wait: true` sends the event alone to /campaigns/query and resolves to its campaigns. */
export interface TrackOptions {
  wait?: boolean
}
export type CampaignListener = (campaigns: Campaign[], event: string) => void
