// The browser SDK: events to /campaigns/query, campaigns back. Events go out one at a time, in order;
// while offline or failing they wait in a bounded queue and are retried with backoff; on page hide the
// rest leaves with keepalive requests (which outlive the page). Nothing is stored or sent before
// consent. No method throws into the host page: failures reach onError, promises resolve (to []).

import { renderSlots } from './render.js'
import { forgetVisitorId, loadVisitorId, uuid4 } from './visitor-id.js'
import type { BeaconError, Campaign, CampaignListener, Fields, InitOptions } from './types.js'

export type { BeaconError, Campaign, CampaignListener, Fields, InitOptions } from './types.js'

interface Item {
  event: string
  fields: Fields
  /** Its Idempotency-Key, kept across retries: a retry of an event Beacon stored is not counted twice. */
  key: string
  /** The body as first sent (a retry must send the same under its key); null until then. */
  body: string | null
  /** Resolves the caller's promise once: with the campaigns, or [] when the first try fails. */
  done: (campaigns: Campaign[]) => void
}

const BACKOFF_MIN_MS = 1000
const BACKOFF_MAX_MS = 60000
const IMPRESSIONS = ['campaignView', 'campaignClick']
const NONE: Campaign[] = []

let options: InitOptions | null = null
let url = ''
let consented = false
/** consent(false) was called: events are dropped, not kept for later. */
let refused = false
/** A consent event with purposes was sent for this visitor id. */
let purposesSent = false
let visitorId: string | null = null
let identity: { profileId: string, profileIdSignature: string } | null = null
const queue: Item[] = []
let sending = false
let timer = 0
let backoffMs = 0
const listeners: CampaignListener[] = []
const shown = new Set<string>()

function report (code: string, message: string): void {
  try { options?.onError?.({ code, message }) } catch {}
}

/** Runs `fn`, never letting an error reach the caller (the host page). */
function guard<A extends unknown[], R> (fn: (...args: A) => R, fallback: () => R): (...args: A) => R {
  return (...args) => {
    try {
      return fn(...args)
    } catch (error) {
      report('sdk_error', String(error))
      return fallback()
    }
  }
}

function enqueue (event: string, fields: Fields = {}): Promise<Campaign[]> {
  if (options === null || refused) return Promise.resolve(NONE)
  return new Promise(resolve => {
    if (queue.length >= (options!.queueMax ?? 100)) {
      // The oldest that is not in flight (that one is answered where it was sent from).
      queue.splice(sending ? 1 : 0, 1)[0]?.done(NONE)
      report('queue_full', 'The oldest queued event was dropped.')
    }
    // While retrying after a failure, the caller is not kept waiting: [] now, the event goes later.
    if (timer !== 0) resolve(NONE)
    queue.push({ event, fields, key: uuid4(), body: null, done: timer === 0 ? resolve : noop })
    void pump()
  })
}

function payload (item: Item): string {
  return JSON.stringify({
    ...item.fields,
    ...identity,
    account: options!.account,
    visitorId,
    platform: options!.platform ?? 'web',
    ...(options!.device === undefined ? {} : { device: options!.device }),
    event: item.event,
  })
}

function post (item: Item): Promise<Response> {
  item.body ??= payload(item)
  return fetch(url, { method: 'POST', keepalive: true, headers: { 'content-type': 'application/json', 'idempotency-key': item.key }, body: item.body })
}

async function pump (): Promise<void> {
  if (sending || !consented || timer !== 0 || queue.length === 0) return
  sending = true
  const item = queue[0]!
  const sentIdentity = identity
  let retry = false
  let answered: Campaign[] | null = null
  try {
    const res = await post(item)
    const answer = await res.json().catch(() => null) as { campaigns?: Campaign[], errors?: BeaconError[] } | null
    if (res.ok) {
      answered = answer?.campaigns ?? NONE
    } else if (res.status === 401 && sentIdentity !== null) {
      // The identity was refused (nothing was recorded): forget it and send the event without it.
      identity = null
      item.body = null
      report('identity_unverified', answer?.errors?.[0]?.message ?? 'The profileId signature was refused.')
    } else if (res.status === 429 || res.status >= 500) {
      retry = true
    } else {
      answered = NONE
      report(answer?.errors?.[0]?.code ?? `http_${res.status}`, answer?.errors?.[0]?.message ?? `HTTP ${res.status}`)
    }
  } catch (error) {
    retry = true
    report('network_error', String(error))
  }
  sending = false
  if (answered !== null) {
    // Taken out by identity: consent(false) may have emptied the queue meanwhile.
    const at = queue.indexOf(item)
    if (at >= 0) queue.splice(at, 1)
    backoffMs = 0
    deliver(item, answered)
  }
  if (retry) {
    item.done(NONE)
    item.done = noop
    backoffMs = Math.min(Math.max(BACKOFF_MIN_MS, backoffMs * 2), BACKOFF_MAX_MS)
    timer = setTimeout(resume, backoffMs) as unknown as number
  } else {
    void pump()
  }
}

function resume (): void {
  clearTimeout(timer)
  timer = 0
  void pump()
}

function deliver (item: Item, campaigns: Campaign[]): void {
  item.done(campaigns)
  if (campaigns === NONE || IMPRESSIONS.includes(item.event)) return
  for (const listener of listeners.slice()) {
    try { listener(campaigns, item.event) } catch (error) { report('sdk_error', String(error)) }
  }
  if (options?.render === false) return
  try {
    for (const id of renderSlots(campaigns)) {
      if (shown.has(id)) continue
      shown.add(id)
      void enqueue('campaignView', { campaignId: id })
    }
  } catch (error) {
    report('sdk_error', String(error))
  }
}

/** The page is going away: what waits leaves now, with requests that outlive the page. */
function flush (): void {
  if (!consented) return
  for (const item of queue.splice(sending ? 1 : 0)) post(item).catch(noop)
}

function onClick (event: MouseEvent): void {
  const slot = (event.target as Element | null)?.closest?.<HTMLElement>('[data-beacon-campaign]')
  const id = slot?.dataset.beaconCampaign
  if (id !== undefined) void enqueue('campaignClick', { campaignId: id })
}

const PURPOSES = ['ads', 'analytics']

/**
 * consent(true) / consent(false); with purposes (`consent(true, ['ads'])`), a `consent` event tells
 * Beacon which ones were granted (saved as the visitor's consent attribute, which destinations read).
 * consent(false) after purposes were sent sends one last consent event withdrawing them all.
 */
function setConsent (granted: boolean, purposes?: readonly string[]): void {
  if (purposes !== undefined && (!Array.isArray(purposes) || purposes.some(purpose => !PURPOSES.includes(purpose)))) {
    report('invalid_consent', 'consent(granted, purposes): purposes is a list of "ads" and "analytics".')
    purposes = undefined
  }
  consented = granted
  refused = !granted
  if (granted) {
    visitorId ??= loadVisitorId()
    if (purposes !== undefined) {
      purposesSent = true
      void enqueue('consent', { purposes: [...new Set(purposes)] })
    }
    void pump()
    return
  }
  for (const item of queue.splice(0)) item.done(NONE)
  if (purposesSent && visitorId !== null && options !== null) {
    // Withdrawn: the purposes go too (the visitor id is forgotten next, so this is its last event).
    post({ event: 'consent', fields: { purposes: [] }, key: uuid4(), body: null, done: noop }).catch(noop)
  }
  purposesSent = false
  visitorId = null
  identity = null
  forgetVisitorId()
}

let listening = false

function init (init: InitOptions): void {
  url = `${init.endpoint.replace(/\/+$/, '')}/campaigns/query?account=${encodeURIComponent(init.account)}`
  options = init
  if (!listening) {
    listening = true
    addEventListener('pagehide', flush)
    addEventListener('online', resume)
    document.addEventListener('click', onClick, true)
  }
  if (init.consent !== false) setConsent(true)
}

function noop (): void {}

const resolved = (): Promise<Campaign[]> => Promise.resolve(NONE)

export const Beacon = {
  init: guard(init, noop),
  /** A page view of the current page (path and referrer filled in). */
  page: guard((fields?: Fields) => enqueue('pageView', { path: location.pathname, referrer: document.referrer || null, ...fields }), resolved),
  productView: guard((fields: Fields & { sku: string }) => enqueue('productView', fields), resolved),
  purchase: guard((fields: Fields & { orderId: string }) => enqueue('purchase', fields), resolved),
  track: guard((event: string, fields?: Fields) => enqueue(event, fields), resolved),
  /** From here on events carry the profileId and its signature (made by the site's backend). */
  identify: guard((profileId: string, signature: string) => {
    // A malformed pair would have every later event refused: it is reported and ignored instead.
    if (typeof profileId === 'string' && profileId !== '' && /^[0-9a-f]{64}$/i.test(signature)) identity = { profileId, profileIdSignature: signature }
    else report('invalid_identity', 'identify(profileId, signature) needs a profileId and a 64-character hex signature.')
  }, noop),
  /** Called with the campaigns of every event answered; returns the function that stops it. */
  onCampaigns: guard((listener: CampaignListener) => {
    listeners.push(listener)
    return () => { listeners.splice(listeners.indexOf(listener) >>> 0, 1) }
  }, () => noop),
  /** consent(true | false); consent(true, ['ads', 'analytics']) also tells Beacon the purposes granted. */
  consent: guard(setConsent, noop),
  visitorId: (): string | null => visitorId,
  /** Send what is queued now instead of waiting for the next retry. */
  flush: guard(resume, noop),
}

export default Beacon
