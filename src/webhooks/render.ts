// renderRequest: the HTTP request for a group of items, from the compiled webhook. Runs once per
// attempt, so it stays allocation-light: templates render by concatenation, constant headers are
// copied from a precomputed object, and a batch body is one string built in a loop.
//
// - POST/PUT: the payload is the JSON body. With a configured batchSize > 1 the body is always a JSON
//   array of the rendered payloads (also for a batch of one), so a receiver sees one shape.
// - GET/DELETE: no body. The payload (which must render a JSON object) becomes query parameters,
//   one per top-level field: strings as they are, numbers and booleans as text, lists and objects as
//   JSON text, null fields left out; appended to the url's own query. One request per item: a batch
//   cannot be spelled in a query, so compileWebhook sets batchSize to 1 for these methods.
// - url and header placeholders render from the first item of a batch.
// - `beacon-replay: <replay id>` when every item is a delivery of one replay of the event log
//   (src/jobs/replay.ts); a batch mixing live and replayed items has none: `{{replay}}` tells each.
// - An item with a `body` of its own (a saved report's result) is sent as that body, not the payload.

import { batchIdOf } from './batch-id.js'
import type { CompiledWebhook } from './compile.js'
import type { HttpMethod } from './config.js'
import { uriComponent } from './template.js'
import type { DeliveryItem } from './types.js'
import { WebhookError, WEBHOOK_ERRORS } from './webhook-error.js'

/** The header that marks a request carrying replayed deliveries only (docs/webhooks.md). */
export const REPLAY_HEADER = 'beacon-replay'

export interface RenderedRequest {
  method: HttpMethod
  url: string
  /** Flat: name, value, name, value, … (what undici takes as it is; adding to an object is slower). */
  headers: string[]
  body: string | null
  /** webhook-id: the item id, or the batch id of several items. */
  deliveryId: string
}

export function renderRequest (webhook: CompiledWebhook, items: readonly DeliveryItem[]): RenderedRequest {
  const first = items[0]
  if (first === undefined || items.length > webhook.batchSize) {
    throw new WebhookError(WEBHOOK_ERRORS.invalid_batch, `A request carries 1 to ${webhook.batchSize} items, not ${items.length}.`)
  }
  const headers = webhook.staticHeaderList.slice()
  for (const header of webhook.headerTemplates) headers.push(header.name, header.value.render(first))
  if (first.replay !== undefined && items.every(item => item.replay === first.replay)) headers.push(REPLAY_HEADER, first.replay)
  let url = webhook.url.render(first)
  if (!webhook.url.isConstant) refuseDotSegments(url, webhook.urlPrefix.length)
  let body: string | null = null
  if (!webhook.hasBody) {
    const query = queryOf(webhook.payload.render(first))
    if (query !== '') url += (url.includes('?') ? '&' : '?') + query
  } else if (webhook.bodyIsArray) {
    body = '['
    for (let i = 0; i < items.length; i++) {
      if (i > 0) body += ','
      const item = items[i] as DeliveryItem
      body += item.body ?? webhook.payload.render(item)
    }
    body += ']'
  } else {
    body = first.body ?? webhook.payload.render(first)
  }
  return { method: webhook.method, url, headers, body, deliveryId: batchIdOf(items) }
}

// "." or ".." as a whole path segment, also percent-encoded (WHATWG URL parsers and servers such as
// nginx decode %2E before removing dot segments, so encoding the dots would not keep the path).
const DOT_SEGMENT = /\/(?:\.|%2e){1,2}(?=[/?#]|$)/i

/**
 * A placeholder value such as ".." would turn `DELETE /api/customers/{{event.id}}` into
 * `DELETE /api/`, with the webhook's credentials: such a request is refused, never sent.
 */
function refuseDotSegments (url: string, pathStart: number): void {
  let end = url.length
  const query = url.indexOf('?', pathStart)
  if (query >= 0) end = query
  const hash = url.indexOf('#', pathStart)
  if (hash >= 0 && hash < end) end = hash
  const path = url.slice(pathStart, end)
  if (DOT_SEGMENT.test(path)) {
    throw new WebhookError(WEBHOOK_ERRORS.dot_segment, 'A url placeholder rendered a dot segment ("." or "..") in the path; the request was not sent.')
  }
}

function queryOf (json: string): string {
  const fields = JSON.parse(json) as Record<string, unknown>
  let query = ''
  for (const key of Object.keys(fields)) {
    const value = fields[key]
    if (value === null || value === undefined) continue
    const text = typeof value === 'string' ? value : typeof value === 'object' ? JSON.stringify(value) : String(value)
    if (query !== '') query += '&'
    query += uriComponent(key) + '=' + uriComponent(text)
  }
  return query
}
