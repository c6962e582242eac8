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
  /** Told of refusals and dropped events; never thrown. */
  onError?: (error: BeaconError) => void
}

export type Fields = Record<string, unknown>
export type CampaignListener = (campaigns: Campaign[], event: string) => void
