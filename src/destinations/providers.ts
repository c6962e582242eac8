// Every destination type, by its name.

import { metaAudience } from './meta-audience.js'
import { metaCapi } from './meta-capi.js'
import { braze } from './braze.js'
import { ga4 } from './ga4.js'
import { googleAdsCustomerMatch } from './google-ads.js'
import { tiktokEvents } from './tiktok-events.js'
import type { ProviderDefinition } from './provider.js'

type AnyProvider = ProviderDefinition<never, never>

const ALL: readonly AnyProvider[] = [metaCapi, metaAudience, ga4, tiktokEvents, braze, googleAdsCustomerMatch].map(provider => provider as unknown as AnyProvider)

export const PROVIDERS: ReadonlyMap<string, AnyProvider> = new Map(ALL.map(provider => [provider.type, provider]))
export const PROVIDER_TYPES: readonly string[] = ALL.map(provider => provider.type)
