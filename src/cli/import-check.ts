// `beacon import` checks the whole file before it writes anything: every item with the validators the
// server runs when it is PUT (the same functions, so the two cannot drift), in the context it will be
// written into (the target account's event types, and the secrets its webhooks and destinations keep).
// An import that would stop half-way leaves a partial account; this finds every problem first, at once.
//
// What only the server knows is left to it: whether private targets are allowed
// (BEACON_WEBHOOK_ALLOW_PRIVATE; checked here as if they were) and changes made meanwhile by someone else.
// Loaded only by the import command: the validators cost CPU no other command needs.

import { ApiError, type ErrorItem } from '../errors.js'
import { validateCampaign } from '../matching/validate-campaign.js'
import { validateSegment } from '../segments/rules.js'
import { compileWebhook, mapSecrets, restoreSecrets, type WebhookConfig } from '../webhooks/index.js'
import { refuseKeptSecretsOnNewTarget, secretsTarget } from '../webhooks/kept-secrets.js'
import { validateDestination, type DestinationConfig } from '../destinations/config.js'
import { AccountPatch, EventTypePut } from '../http/schemas.js'
import { validator } from '../validator.js'
import { NAME_PATTERN } from '../patterns.js'

type Item = Record<string, unknown>

/** What the target account holds now, as its GET routes show it. */
export interface ImportTarget {
  account: string
  /** Every event type it knows: built in and its own. */
  eventTypes: ReadonlySet<string>
  /** Its webhooks by id (secrets shown as "[redacted]"). */
  webhooks: ReadonlyMap<string, Item>
  /** Its destinations by id (credentials never shown: `credentialsSet` names them). */
  destinations: ReadonlyMap<string, Item>
}

/** The parts of an export document the check reads. */
export interface ImportItems {
  settings: Item
  eventTypes: Item[]
  segments: Item[]
  campaigns: Item[]
  webhooks: Item[]
  destinations: Item[]
}

/** Stands for a secret the target keeps: never sent, only there so the validators see a secret in its place. */
const KEPT = 'kept-by-the-target-account'
const NAME = new RegExp(NAME_PATTERN)
const checkSettings = validator(AccountPatch)
const checkEventType = validator(EventTypePut)

/** Every problem of the document, each line naming its item and field; empty when it can all be written. */
export function importProblems (doc: ImportItems, target: ImportTarget): string[] {
  const problems: string[] = []
  const report = (where: string, run: () => ErrorItem[] | void): void => {
    let items: ErrorItem[] | void
    try {
      items = run()
    } catch (error) {
      if (!(error instanceof ApiError)) throw error
      items = error.items
    }
    for (const item of items ?? []) problems.push(`${where}${item.field === undefined || item.field === '' ? '' : ' ' + item.field}: ${item.code}: ${item.message}`)
  }
  if (Object.keys(doc.settings).length > 0) report('settings', () => { checkSettings(doc.settings) })

  const events = new Set(target.eventTypes)
  for (const item of doc.eventTypes) {
    const name = String(item.name)
    report(`event type "${name}"`, () => { checkName(name, 'event type name'); checkEventType({ required: item.required }) })
    events.add(name)
  }
  for (const item of doc.segments) {
    const { name, ...body } = item
    report(`segment "${String(name)}"`, () => { checkName(String(name), 'segment name'); return validateSegment(body) })
  }
  for (const item of doc.campaigns) {
    const { id, ...body } = item
    report(`campaign "${String(id)}"`, () => {
      checkName(String(id), 'campaign id')
      const items = validateCampaign(body)
      return items.length > 0 ? items : unknownEvents(body, events)
    })
  }
  for (const item of doc.webhooks) {
    const { id, ...body } = item
    report(`webhook "${String(id)}"`, () => {
      checkName(String(id), 'webhook id')
      compileWebhook(String(id), target.account, withKeptSecrets(body, target.webhooks.get(String(id)) ?? null), { allowPrivate: true })
    })
  }
  for (const item of doc.destinations) {
    const { id, ...body } = item
    report(`destination "${String(id)}"`, () => { checkName(String(id), 'destination id'); checkDestination(body, target.destinations.get(String(id)) ?? null) })
  }
  return problems
}

function checkName (name: string, what: string): void {
  if (!NAME.test(name)) throw new ApiError('invalid_field', `A ${what} is 1 to 128 characters of A-Z a-z 0-9 _ . : -`, '/name')
}

/** The campaign's trigger and goal events that are neither built in, nor the account's, nor in the file (as the server's PUT refuses them). */
function unknownEvents (body: Item, events: ReadonlySet<string>): ErrorItem[] {
  const trigger = body.trigger as { events?: string[] } | undefined
  const goals = (body.goals ?? []) as { event: string }[]
  const unknown = (name: string, field: string): ErrorItem[] => events.has(name)
    ? []
    : [{ code: 'unknown_event_type', field, message: `The event type "${name}" is not built in, not defined for this account and not in the file.` }]
  return [
    ...(trigger?.events ?? []).flatMap((name, i) => unknown(name, `/trigger/events/${i}`)),
    ...goals.flatMap((goal, i) => unknown(goal.event, `/goals/${i}/event`)),
  ]
}

/**
 * The webhook as the server will save it: a "[redacted]" where the target's webhook of that id keeps a
 * secret becomes that secret (while it still goes where it went), as the server's PUT does; one with
 * nothing to keep stays "[redacted]" and is refused, as the server would.
 */
function withKeptSecrets (body: Item, stored: Item | null): unknown {
  if (stored === null) return body
  const { id: _id, ...view } = stored
  const previous = mapSecrets(view as unknown as WebhookConfig, () => KEPT)
  const kept: string[] = []
  const restored = restoreSecrets(body, previous, kept)
  const request = (body.request ?? {}) as Item
  const delivery = (body.delivery ?? {}) as Item
  refuseKeptSecretsOnNewTarget(kept, secretsTarget([previous.request.url, previous.delivery.proxy]), secretsTarget([request.url, delivery.proxy]))
  return restored
}

/**
 * As the server checks it, with the credentials the target keeps. One without the credentials it needs
 * to be enabled is imported disabled (transfer.ts), so that alone is no problem.
 */
function checkDestination (body: Item, stored: Item | null): void {
  const storedConfig = stored === null ? null : storedDestination(stored)
  try {
    validateDestination(body, storedConfig, { allowPrivate: true })
  } catch (error) {
    if (!(error instanceof ApiError) || !error.items.every(item => item.field?.startsWith('/credentials/') === true)) throw error
    validateDestination({ ...body, enabled: false }, storedConfig, { allowPrivate: true })
  }
}

function storedDestination (view: Item): DestinationConfig {
  const { id: _id, health: _health, credentialsSet, ...config } = view
  const credentials = Object.fromEntries(((credentialsSet ?? []) as string[]).map(name => [name, KEPT]))
  return { ...config, credentials } as unknown as DestinationConfig
}
