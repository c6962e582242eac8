// Seeded, deterministic data for bench/match.ts: a shop's catalogue, an account's campaigns and
// a stream of visitor events with their contexts.
//
// The account model, which decides how the index performs, is stated here so the numbers can be
// judged: a few hand-written "broad" campaigns (their count grows slowly with account size:
// 10 + 10·log10(N/10), so 10, 20, 30, 40 at N = 10 .. 10,000) target event kinds, platforms,
// devices, sections of the site, segments and visitor traits; every other campaign is a
// "programmatic" one aimed at a product, category, brand, category page or UTM campaign, as
// feeds and merchandising tools generate them — that is how an account gets to thousands.
// Popular products are both viewed and promoted more (a squared-uniform skew on both sides).

import type { CampaignDef, CampaignInput, Condition, MatchContext } from '../src/matching/index.js'

export type Rand = () => number

export function mulberry32 (seed: number): Rand {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const pick = <T>(r: Rand, list: readonly T[]): T => list[Math.floor(r() * list.length)] as T
// Index skewed towards the head of the list: popular items first.
const pickPopular = <T>(r: Rand, list: readonly T[]): T => list[Math.floor(r() * r() * list.length)] as T
const chance = (r: Rand, p: number): boolean => r() < p
const int = (r: Rand, min: number, max: number): number => min + Math.floor(r() * (max - min + 1))

function weighted<T extends string> (r: Rand, table: Record<T, number>): T {
  let x = r()
  const entries = Object.entries(table) as Array<[T, number]>
  for (const [k, w] of entries) { if ((x -= w) < 0) return k }
  return (entries[entries.length - 1] as [T, number])[0]
}

const pad = (n: number, width: number): string => String(n).padStart(width, '0')

export const EVENT_KINDS = {
  pageView: 0.30, productView: 0.30, search: 0.10, addToCart: 0.10,
  removeFromCart: 0.04, checkout: 0.06, purchase: 0.05, login: 0.05,
}
export const PLATFORMS = { web: 0.55, ios: 0.2, android: 0.2, kiosk: 0.05 }
export const DEVICES = { mobile: 0.55, desktop: 0.35, tablet: 0.10 }
type Kind = keyof typeof EVENT_KINDS

const COUNTRIES = Array.from({ length: 30 }, (_, i) => `C${pad(i, 2)}`)
const INTERESTS = ['running', 'hiking', 'yoga', 'tennis', 'cycling', 'fashion', 'outdoor', 'kids', 'home', 'tech']
const SEGMENTS = Array.from({ length: 30 }, (_, i) => `seg-${pad(i, 2)}`)
const REFERRERS = ['google', 'newsletter', 'facebook', 'instagram', 'direct']
const UTM = Array.from({ length: 2000 }, (_, i) => `utm-${pad(i, 4)}`)
const SECTIONS = ['/c/*', '/p/*', '/blog/*', '/checkout*', '/sale', '/', '/search']

interface Product { sku: string, category: string, dept: string, brand: string, price: number }

export interface Catalog {
  products: Product[]
  categories: Array<{ name: string, dept: string }>
  brands: string[]
}

export function makeCatalog (r: Rand): Catalog {
  const depts = Array.from({ length: 20 }, (_, i) => `dept-${pad(i, 2)}`)
  const categories = Array.from({ length: 400 }, (_, i) => ({ name: `cat-${pad(i, 3)}`, dept: depts[i % depts.length] as string }))
  const brands = Array.from({ length: 500 }, (_, i) => `brand-${pad(i, 3)}`)
  const products = Array.from({ length: 20_000 }, (_, i) => {
    const category = pick(r, categories)
    return { sku: `SKU${pad(i, 5)}`, category: category.name, dept: category.dept, brand: pick(r, brands), price: Math.round(r() * 30_000) / 100 }
  })
  return { products, categories, brands }
}

// Conditions about the visitor rather than the event: what broad campaigns mostly use and
// what programmatic ones add as extra leaves.
const VISITOR_LEAF_KINDS = 13

// `kind` and `variant` fix the leaf's fact and op (a template); values are always drawn fresh.
function visitorLeaf (r: Rand, kind = int(r, 0, VISITOR_LEAF_KINDS - 1), variant = chance(r, 0.5)): Condition {
  switch (kind) {
    case 0: return { fact: 'attribute.plan', op: 'eq', value: pick(r, ['free', 'pro', 'enterprise']) }
    case 1: return { fact: 'attribute.country', op: 'in', value: Array.from({ length: int(r, 1, 5) }, () => pick(r, COUNTRIES)) }
    case 2: return { fact: 'attribute.loyaltyTier', op: 'gte', value: int(r, 1, 4) }
    case 3: return { fact: 'attribute.newsletter', op: 'eq', value: variant }
    case 4: return { fact: 'attribute.interests', op: 'contains', value: pick(r, INTERESTS) }
    case 5: return { fact: 'segment', op: 'contains', value: pick(r, SEGMENTS) }
    case 6: return { not: { fact: 'segment', op: 'contains', value: pick(r, SEGMENTS) } }
    case 7: return { fact: 'visitor.pageViews', op: 'gte', value: int(r, 2, 30) }
    case 8: return { fact: 'visitor.purchases', op: variant ? 'eq' : 'gt', value: int(r, 0, 2) }
    case 9: return { fact: 'visitor.totalSpent', op: 'gt', value: int(r, 10, 500) }
    case 10: return { fact: 'visitor.lastSeenSecondsAgo', op: 'gt', value: int(r, 60, 86_400) }
    case 11: return { fact: 'event.referrer', op: 'eq', value: pick(r, REFERRERS) }
    default: return { fact: 'time.hour', op: variant ? 'gte' : 'lt', value: int(r, 6, 22) }
  }
}

function broadRule (r: Rand, leaves: number): Condition {
  const list = Array.from({ length: leaves }, () => visitorLeaf(r))
  if (leaves >= 3 && chance(r, 0.3)) {
    // Some hand-written rules mix in an "any" group.
    const split = int(r, 1, leaves - 1)
    return { all: [...list.slice(split), { any: list.slice(0, split) }] }
  }
  return list.length === 1 ? list[0] as Condition : { all: list }
}

function restrict (r: Rand, table: Record<string, number>, p: number, max: number): string[] | undefined {
  if (!chance(r, p)) return undefined
  return [...new Set(Array.from({ length: int(r, 1, max) }, () => weighted(r, table)))]
}

function broad (r: Rand): CampaignDef {
  const trigger: CampaignDef['trigger'] = {}
  const events = restrict(r, EVENT_KINDS, 0.7, 2)
  const platforms = restrict(r, PLATFORMS, 0.3, 2)
  const devices = restrict(r, DEVICES, 0.3, 2)
  if (events !== undefined) trigger.events = events
  if (platforms !== undefined) trigger.platforms = platforms
  if (devices !== undefined) trigger.devices = devices
  if (chance(r, 0.2)) trigger.paths = [pick(r, SECTIONS)]
  const def: CampaignDef = { name: 'broad', status: 'active', priority: int(r, 0, 100), trigger, content: { html: '<div>promo</div>' } }
  if (chance(r, 0.85)) def.rule = broadRule(r, int(r, 1, 6))
  return def
}

// Programmatic campaigns come out of a few templates per account (a feed tool's "sku promo for
// loyal customers", "category banner for newsletter readers", ...): the template fixes what is
// targeted and which visitor conditions are added; each campaign draws its own values.
interface Template {
  target: 'sku' | 'category' | 'brand' | 'path' | 'utm'
  events: string[] | undefined
  extras: Array<[number, boolean]>
  pricedFrom: boolean
  platforms: boolean
  exactPath: boolean
}

export function makeTemplates (r: Rand, count = 25): Template[] {
  return Array.from({ length: count }, () => {
    const k = r()
    const target = k < 0.40 ? 'sku' : k < 0.60 ? 'category' : k < 0.75 ? 'brand' : k < 0.90 ? 'path' : 'utm'
    const events = target === 'sku' ? (chance(r, 0.6) ? ['productView'] : ['productView', 'addToCart'])
      : target === 'category' ? (chance(r, 0.5) ? ['productView'] : ['pageView', 'productView'])
        : target === 'brand' ? ['productView'] : undefined
    return {
      target,
      events,
      extras: Array.from({ length: int(r, 0, 5) }, () => [int(r, 0, VISITOR_LEAF_KINDS - 1), chance(r, 0.5)] as [number, boolean]),
      pricedFrom: target === 'brand' && chance(r, 0.5),
      platforms: chance(r, 0.2),
      exactPath: chance(r, 0.5),
    }
  })
}

function programmatic (r: Rand, catalog: Catalog, t: Template): CampaignDef {
  const extras = t.extras.map(([kind, variant]) => visitorLeaf(r, kind, variant))
  const trigger: CampaignDef['trigger'] = {}
  if (t.events !== undefined) trigger.events = t.events
  let key: Condition | null = null
  switch (t.target) {
    case 'sku': key = { fact: 'event.sku', op: 'in', value: Array.from({ length: int(r, 1, 3) }, () => pickPopular(r, catalog.products).sku) }; break
    case 'category': key = { fact: 'event.category', op: 'eq', value: pickPopular(r, catalog.categories).name }; break
    case 'brand': key = { fact: 'event.brand', op: 'eq', value: pickPopular(r, catalog.brands) }; break
    case 'utm': key = { fact: 'event.utm_campaign', op: 'eq', value: pickPopular(r, UTM) }; break
    case 'path': {
      const c = pickPopular(r, catalog.categories)
      trigger.paths = t.exactPath ? [`/c/${c.dept}/${c.name}`] : [`/c/${c.dept}/${c.name}/*`]
    }
  }
  if (t.pricedFrom) extras.push({ fact: 'event.price', op: 'gte', value: int(r, 20, 200) })
  if (t.platforms) trigger.platforms = restrict(r, PLATFORMS, 1, 2) as string[]
  const leaves = (key === null ? extras : [key, ...extras]).slice(0, 6)
  const def: CampaignDef = { name: 'feed', status: 'active', priority: int(r, 0, 100), trigger, content: { html: '<div>product promo</div>', sku: 'x' } }
  if (leaves.length > 0) def.rule = leaves.length === 1 ? leaves[0] as Condition : { all: leaves }
  return def
}

export const BASE_MS = Date.UTC(2025, 5, 3, 8)

function schedule (r: Rand, def: CampaignDef): void {
  if (chance(r, 0.05)) def.status = 'paused'
  if (chance(r, 0.3)) {
    // Mostly running now; some ended or not started yet.
    const startMs = BASE_MS + int(r, -30, 2) * 86_400_000
    def.startsAt = new Date(startMs).toISOString()
    def.endsAt = new Date(startMs + int(r, 1, 60) * 86_400_000).toISOString()
  }
  if (chance(r, 0.3)) def.frequencyCap = { max: int(r, 1, 5), per: pick(r, ['hour', 'day', 'week', 'lifetime'] as const) }
}

export function broadCount (n: number): number {
  return Math.min(n, Math.round(10 + 10 * Math.log10(n / 10)))
}

export type AccountShape = 'typical' | 'untemplated' | 'allBroad'

/**
 * An account of `n` campaigns. 'typical' is the model above; 'untemplated' gives every
 * programmatic campaign its own random visitor conditions (no shared templates); 'allBroad'
 * makes every campaign a hand-written broad one, which no key can index (the worst case).
 * Broad and programmatic campaigns come from separate seeded streams, so accounts of one shape
 * are nested: the 1,000-campaign account holds the 100-campaign one plus more, and growth is
 * measured on the same account getting bigger rather than on unrelated draws.
 */
export function makeCampaigns (seed: number, catalog: Catalog, n: number, shape: AccountShape = 'typical'): CampaignInput[] {
  const nBroad = shape === 'allBroad' ? n : broadCount(n)
  const broadRand = mulberry32(seed)
  const feedRand = mulberry32(seed + 1)
  const templates = makeTemplates(mulberry32(seed + 2))
  const make = (i: number): CampaignInput => {
    const isBroad = i < nBroad
    const r = isBroad ? broadRand : feedRand
    const def = isBroad ? broad(r) : programmatic(r, catalog, shape === 'untemplated' ? makeTemplates(r, 1)[0] as Template : pickPopular(r, templates))
    schedule(r, def)
    return { id: isBroad ? `broad-${pad(i, 5)}` : `feed-${pad(i - nBroad, 5)}`, def }
  }
  return Array.from({ length: n }, (_, i) => make(i))
}

function eventBody (r: Rand, catalog: Catalog, kind: Kind): Record<string, unknown> {
  const event: Record<string, unknown> = { event: kind, platform: weighted(r, PLATFORMS), device: weighted(r, DEVICES) }
  if (chance(r, 0.3)) event.referrer = pick(r, REFERRERS)
  if (chance(r, 0.1)) event.utm_campaign = pickPopular(r, UTM)
  const p = pickPopular(r, catalog.products)
  switch (kind) {
    case 'productView': case 'addToCart': case 'removeFromCart':
      Object.assign(event, { path: `/p/${p.sku}`, sku: p.sku, price: p.price, brand: p.brand, category: p.category, breadcrumb: [p.dept, p.category] })
      break
    case 'pageView': {
      const c = pickPopular(r, catalog.categories)
      const k = r()
      if (k < 0.5) Object.assign(event, { path: `/c/${c.dept}/${c.name}` + (chance(r, 0.3) ? `/page-${int(r, 2, 9)}` : ''), category: c.name })
      else if (k < 0.7) event.path = '/'
      else if (k < 0.85) event.path = `/blog/post-${int(r, 1, 300)}`
      else event.path = '/sale'
      break
    }
    case 'search': Object.assign(event, { path: '/search', query: pick(r, INTERESTS) }); break
    case 'checkout': Object.assign(event, { path: '/checkout', orderTotal: p.price * int(r, 1, 3) }); break
    case 'purchase': Object.assign(event, { path: '/checkout/done', orderTotal: p.price, purchasedItems: [p.sku] }); break
    case 'login': event.path = '/login'; break
  }
  return event
}

export function makeContexts (r: Rand, catalog: Catalog, count: number): MatchContext[] {
  return Array.from({ length: count }, (_, i) => {
    const kind = weighted(r, EVENT_KINDS)
    const nowMs = BASE_MS + i * 37_000
    const attributes: Record<string, unknown> = {}
    if (chance(r, 0.8)) attributes.plan = pick(r, ['free', 'free', 'pro', 'enterprise'])
    if (chance(r, 0.9)) attributes.country = pick(r, COUNTRIES)
    if (chance(r, 0.6)) attributes.loyaltyTier = int(r, 0, 4)
    if (chance(r, 0.5)) attributes.newsletter = chance(r, 0.4)
    if (chance(r, 0.5)) attributes.interests = INTERESTS.filter(() => chance(r, 0.2))
    return {
      event: eventBody(r, catalog, kind),
      attributes,
      segments: new Set(SEGMENTS.filter(() => chance(r, 0.07))),
      visitor: {
        pageViews: int(r, 1, 60), productViews: int(r, 0, 30), purchases: int(r, 0, 4), totalSpent: int(r, 0, 900),
        firstSeenMs: nowMs - int(r, 0, 90) * 86_400_000, lastSeenMs: nowMs - int(r, 0, 7 * 86_400) * 1000,
        viewedSkus: Array.from({ length: int(r, 0, 8) }, () => pickPopular(r, catalog.products).sku),
        purchasedSkus: Array.from({ length: int(r, 0, 2) }, () => pickPopular(r, catalog.products).sku),
        viewedCategories: Array.from({ length: int(r, 0, 4) }, () => pickPopular(r, catalog.categories).name),
      },
      nowMs,
    }
  })
}
