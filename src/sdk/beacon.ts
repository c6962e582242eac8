// The browser SDK: events to /campaigns/query, campaigns back. Events go out in order, one at a time;
// those that need no campaign answer (track() without `wait`, campaign views and clicks) wait a few
// hundred ms to go out together to /events/batch, each with a messageId (its dedupe key on a retry).
// While offline or failing, events wait in a bounded queue and are retried with backoff; on page hide
// the rest leaves with keepalive requests (which outlive the page). Nothing is stored or sent before
// consent. No method throws into the host page: failures reach onError, promises resolve (to []).

import { renderSlots } from './render.js'
import { forgetVisitorId, loadVisitorId, uuid4 } from './visitor-id.js'
import { forgetRoute, keepRoute, loadRoute, routed } from './route-hint.js'
import type { BeaconError, Campaign, CampaignListener, Fields, InitOptions, TrackOptions } from './types.js'

export type { BeaconError, Campaign, CampaignListener, Fields, InitOptions, TrackOptions } from './types.js'

interface Item {
  event: string
  fields: Fields
  /** Its Idempotency-Key (alone) or messageId (batched), kept across retries: a retry of an event Beacon stored is not counted twice. */
  key: string
  /** Sent with others to /events/batch (no campaigns answered) rather than alone. */
  batched: boolean
  /** The body as first sent (a retry must send the same under its key); null until then. */
  body: string | null
  /** Resolves the caller's promise once: with the campaigns, or [] when its first try (or one before it) fails, it is dropped, or it leaves with the page. */
  done: (campaigns: Campaign[]) => void
}

const BACKOFF_MIN_MS = 1000
const BACKOFF_MAX_MS = 60000
const BATCH_DELAY_MS = 300
const BATCH_MAX = 50
/** What /events/batch takes at most. */
const BATCH_LIMIT = 500
const IMPRESSIONS = ['campaignView', 'campaignClick']
const NONE: Campaign[] = []

let options: InitOptions | null = null
let url = ''
let batchUrl = ''
let consented = false
/** consent(false) was called: events are dropped, not kept for later. */
let refused = false
/** A consent event with purposes was sent for this visitor id. */
let purposesSent = false
let visitorId: string | null = null
let identity: { profileId: string, profileIdSignature: string } | null = null
const queue: Item[] = []
let sending = false
/** Items at the head of the queue in flight (a batch's, or the one sent alone). */
let inFlight = 0
let timer = 0
/** The wait of the batched events at the head of the queue; `batchDue`: it ended (or flush asked): send them. */
let batchTimer = 0
let batchDue = false
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

function enqueue (event: string, fields: Fields = {}, batched = false): Promise<Campaign[]> {
  if (options === null || refused) return Promise.resolve(NONE)
  return new Promise(resolve => {
    if (queue.length >= (options!.queueMax ?? 100)) {
      // The oldest that is not in flight (that one is answered where it was sent from).
      const dropped = queue.splice(inFlight, 1)[0]
      if (dropped !== undefined) settle(dropped)
      report('queue_full', 'The oldest queued event was dropped.')
    }
    // While retrying after a failure, the caller is not kept waiting: [] now, the event goes later.
    if (timer !== 0) resolve(NONE)
    queue.push({ event, fields, key: uuid4(), batched, body: null, done: timer === 0 ? resolve : noop })
    void pump()
  })
}

function payload (item: Item): string {
  return JSON.stringify({
    ...item.fields,
    ...identity,
    // A batch names the account once, for all its events; each event carries its messageId.
    ...(item.batched ? { messageId: item.key } : { account: options!.account }),
    visitorId,
    platform: options!.platform ?? 'web',
    ...(options!.device === undefined ? {} : { device: options!.device }),
    event: item.event,
  })
}

function batchBody (items: readonly Item[]): string {
  return `{"account":${JSON.stringify(options!.account)},"events":[${items.map(item => (item.body ??= payload(item))).join(',')}]}`
}

function postBatch (items: readonly Item[]): Promise<Response> {
  return fetch(batchUrl, { method: 'POST', keepalive: true, headers: routed({ 'content-type': 'application/json' }), body: batchBody(items) })
}

function batchMax (): number {
  const max = options?.batchMax
  return typeof max === 'number' && max >= 1 ? Math.min(Math.floor(max), BATCH_LIMIT) : BATCH_MAX
}

/** The batched items at the head of the queue, at most a batch's worth. */
function headBatch (): Item[] {
  const max = batchMax()
  const items: Item[] = []
  for (const item of queue) {
    if (!item.batched || items.length === max) break
    items.push(item)
  }
  return items
}

function batchTime (): void {
  batchTimer = 0
  batchDue = true
  void pump()
}

function post (item: Item): Promise<Response> {
  item.body ??= payload(item)
  return fetch(url, { method: 'POST', keepalive: true, headers: routed({ 'content-type': 'application/json', 'idempotency-key': item.key }), body: item.body })
}

async function pump (): Promise<void> {
  if (sending || !consented || timer !== 0 || queue.length === 0) return
  if (queue[0]!.batched) {
    const items = headBatch()
    // Sent when the wait ended, when full, or when an event sent alone waits behind them (order is kept).
    if (batchDue || items.length === batchMax() || items.length < queue.length) return sendBatch(items)
    if (batchTimer === 0) batchTimer = setTimeout(batchTime, options!.batchDelayMs ?? BATCH_DELAY_MS) as unknown as number
    return
  }
  sending = true
  inFlight = 1
  const item = queue[0]!
  const sentIdentity = identity
  let retry = false
  let answered: Campaign[] | null = null
  try {
    const res = await post(item)
    keepRoute(res)
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
  inFlight = 0
  if (answered !== null) {
    // Taken out by identity: consent(false) may have emptied the queue meanwhile.
    const at = queue.indexOf(item)
    if (at >= 0) queue.splice(at, 1)
    backoffMs = 0
    deliver(item, answered)
  }
  if (retry) {
    // Every caller waiting behind it too: they are told [] now and their events go later (not awaited).
    for (const waiting of queue) settle(waiting)
    settle(item)
    backoffMs = Math.min(Math.max(BACKOFF_MIN_MS, backoffMs * 2), BACKOFF_MAX_MS)
    timer = setTimeout(resume, backoffMs) as unknown as number
  } else {
    void pump()
  }
}

/** Resolves the caller's promise with [] (once: `done` becomes a no-op). */
function settle (item: Item): void {
  const done = item.done
  item.done = noop
  done(NONE)
}

/** A batch's answer: one outcome per event, in order. */
interface Outcome {
  status: number
  error?: BeaconError
}

async function sendBatch (items: Item[]): Promise<void> {
  clearTimeout(batchTimer)
  batchTimer = 0
  batchDue = false
  sending = true
  inFlight = items.length
  const sentIdentity = identity
  let outcomes: Outcome[] | null = null
  try {
    const res = await postBatch(items)
    keepRoute(res)
    const answer = await res.json().catch(() => null) as { results?: Outcome[], errors?: BeaconError[] } | null
    if (res.ok && answer?.results?.length === items.length) outcomes = answer.results
    else if (res.status !== 429 && res.status < 500) {
      // The whole batch refused (its body, the origin): each event takes that refusal.
      const error = answer?.errors?.[0] ?? { code: `http_${res.status}`, message: `HTTP ${res.status}` }
      outcomes = items.map(() => ({ status: res.status, error }))
    }
  } catch (error) {
    report('network_error', String(error))
  }
  sending = false
  inFlight = 0
  let retry = outcomes === null
  if (outcomes !== null) {
    let identityRefused = false
    items.forEach((item, i) => {
      const outcome = outcomes![i]!
      if (outcome.status === 429 || outcome.status >= 500) {
        retry = true
        return
      }
      if (outcome.status === 401 && sentIdentity !== null && outcome.error?.code === 'identity_unverified') {
        // Nothing recorded: sent again without the identity (a new body, the same messageId).
        identityRefused = true
        item.body = null
        return
      }
      const at = queue.indexOf(item)
      if (at >= 0) queue.splice(at, 1)
      if (outcome.status !== 200) report(outcome.error?.code ?? `http_${outcome.status}`, outcome.error?.message ?? `HTTP ${outcome.status}`)
      settle(item)
    })
    if (identityRefused) {
      identity = null
      report('identity_unverified', 'The profileId signature was refused.')
    }
  }
  if (retry) {
    // Every caller waiting behind the batch too: they are told [] now and their events go later.
    for (const waiting of queue) settle(waiting)
    backoffMs = Math.min(Math.max(BACKOFF_MIN_MS, backoffMs * 2), BACKOFF_MAX_MS)
    timer = setTimeout(resume, backoffMs) as unknown as number
  } else {
    backoffMs = 0
    void pump()
  }
}

function resume (): void {
  clearTimeout(timer)
  timer = 0
  // Batched events waiting go now too.
  batchDue = true
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
      void enqueue('campaignView', { campaignId: id }, true)
    }
  } catch (error) {
    report('sdk_error', String(error))
  }
}

/** The page is going away: what waits leaves now, with requests that outlive the page. */
function flush (): void {
  if (!consented) return
  const rest = queue.splice(inFlight)
  const max = batchMax()
  let batch: Item[] = []
  const send = (): void => {
    if (batch.length > 0) postBatch(batch).catch(noop)
    batch = []
  }
  for (const item of rest) {
    settle(item)
    if (!item.batched) {
      send()
      post(item).catch(noop)
      continue
    }
    batch.push(item)
    if (batch.length === max) send()
  }
  send()
}

function onClick (event: MouseEvent): void {
  const slot = (event.target as Element | null)?.closest?.<HTMLElement>('[data-beacon-campaign]')
  const id = slot?.dataset.beaconCampaign
  if (id !== undefined) void enqueue('campaignClick', { campaignId: id }, true)
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
    if (visitorId === null) {
      visitorId = loadVisitorId()
      loadRoute()
    }
    if (purposes !== undefined) {
      purposesSent = true
      void enqueue('consent', { purposes: [...new Set(purposes)] })
    }
    void pump()
    return
  }
  for (const item of queue.splice(0)) settle(item)
  if (purposesSent && visitorId !== null && options !== null) {
    // Withdrawn: the purposes go too (the visitor id is forgotten next, so this is its last event).
    post({ event: 'consent', fields: { purposes: [] }, key: uuid4(), batched: false, body: null, done: noop }).catch(noop)
  }
  purposesSent = false
  visitorId = null
  identity = null
  forgetVisitorId()
  forgetRoute()
}

let listening = false

function init (init: InitOptions): void {
  const base = init.endpoint.replace(/\/+$/, '')
  url = `${base}/campaigns/query?account=${encodeURIComponent(init.account)}`
  batchUrl = `${base}/events/batch?account=${encodeURIComponent(init.account)}`
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
  /**
   * Any event, sent with others to /events/batch: resolves to [] once Beacon stored it (or at once while
   * retrying). `{ wait: true }`: sent alone to /campaigns/query, resolves to its campaigns.
   */
  track: guard((event: string, fields?: Fields, track?: TrackOptions) => enqueue(event, fields, track?.wait !== true), resolved),
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
