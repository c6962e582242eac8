// `beacon export` and `beacon import`: an account's configuration (its browser and rate settings, event
// types, campaigns, segments, webhooks) as one JSON document, through the admin API. Import first checks
// the whole file against the target account (import-check.ts: every problem at once, nothing written),
// then sets the settings and PUTs each item (creating or replacing, never deleting what the file does not
// name); a refusal only the server can make (BEACON_WEBHOOK_ALLOW_PRIVATE, a change made meanwhile)
// stops it there, saying what was imported before it. The identity secret is not exported:
// the target account keeps its own (a site signing profile ids for it must use that one). Webhook secrets leave redacted ("[redacted]"): importing into the same account keeps the
// saved secrets; into another account, put the real values in the file first. Destination credentials
// never leave (the admin API never returns them): a destination whose credentials the target account
// does not hold is imported disabled, to be given its credentials and enabled there.

import { readFileSync, writeFileSync } from 'node:fs'
import { BUILT_IN_EVENTS } from '../catalog/event-types.js'
import { VERSION } from '../package-root.js'
import { listAll, RefusedError, segment, type AdminClient } from './client.js'
import { CliError } from './errors.js'
import { pretty } from './accounts.js'
import type { Output } from './admin-key.js'

/** The document's format; bumped if it changes incompatibly. */
export const EXPORT_FORMAT = 1

type Item = Record<string, unknown>

/** The account's settings an import carries over (not its name, suspension or identity secret). */
const SETTINGS = ['allowedOrigins', 'identityVerification', 'allowBrowserTokens', 'requireConsent', 'rateLimit'] as const

export interface ExportDocument {
  beacon: { format: number, version: string }
  exportedAt: string
  account: { account: string, name: string }
  settings?: Item
  eventTypes: Item[]
  segments: Item[]
  campaigns: Item[]
  webhooks: Item[]
  destinations: Item[]
}

/** The kinds in import order: event types first (rules name them), campaigns after the segments they test. */
const KINDS = [
  { key: 'eventTypes', path: 'event-types', id: 'name', noun: ['event type', 'event types'] },
  { key: 'segments', path: 'segments', id: 'name', noun: ['segment', 'segments'] },
  { key: 'campaigns', path: 'campaigns', id: 'id', noun: ['campaign', 'campaigns'] },
  { key: 'webhooks', path: 'webhooks', id: 'id', noun: ['webhook', 'webhooks'] },
  { key: 'destinations', path: 'destinations', id: 'id', noun: ['destination', 'destinations'] },
] as const

export async function exportAccount (client: AdminClient, account: string, out: string | undefined, output: Output): Promise<void> {
  const base = `/admin/accounts/${segment(account)}`
  const info = await client.request<{ account: string, name: string } & Item>('GET', base)
  const eventTypes = (await listAll<Item>(client, `${base}/event-types`, 'eventTypes'))
    .filter(type => !BUILT_IN_EVENTS.has(type.name as string))
  const campaigns = await listAll<Item>(client, `${base}/campaigns`, 'campaigns')
  // A segment's member count is state, not configuration: it is not exported.
  const segments = (await listAll<Item>(client, `${base}/segments`, 'segments')).map(({ members: _members, ...definition }) => definition)
  const webhooks = await listAll<Item>(client, `${base}/webhooks`, 'webhooks')
  // What a destination shows of its state (health, which credentials are set) is not configuration.
  const destinations = (await listAll<Item>(client, `${base}/destinations`, 'destinations')).map(({ health: _health, credentialsSet: _set, ...definition }) => definition)
  const doc: ExportDocument = {
    beacon: { format: EXPORT_FORMAT, version: VERSION },
    exportedAt: new Date().toISOString(),
    account: { account: info.account, name: info.name },
    settings: Object.fromEntries(SETTINGS.filter(key => info[key] !== undefined).map(key => [key, info[key]])),
    eventTypes, segments, campaigns, webhooks, destinations,
  }
  const text = pretty(doc)
  if (out === undefined) {
    output.out(text)
    return
  }
  try {
    writeFileSync(out, text)
  } catch (error) {
    throw new CliError(`cannot write ${out}: ${(error as Error).message}`)
  }
  output.err(`Exported ${counts(doc)} of account ${info.account} to ${out}.\n`)
}

export async function importAccount (client: AdminClient, account: string, file: string, output: Output): Promise<void> {
  const doc = readDocument(file)
  const base = `/admin/accounts/${segment(account)}`
  await client.request('GET', base) // the account exists, before anything is written
  await checkWholeFile(client, account, base, file, doc)
  const settings = Object.fromEntries(SETTINGS.filter(key => doc.settings?.[key] !== undefined).map(key => [key, doc.settings![key]]))
  if (Object.keys(settings).length > 0) {
    try {
      await client.request('PATCH', base, settings)
    } catch (error) {
      throw new CliError(`import stopped at the account's settings (before importing anything): ${error instanceof Error ? error.message : String(error)}`)
    }
  }
  const done: Record<string, number> = { eventTypes: 0, segments: 0, campaigns: 0, webhooks: 0, destinations: 0 }
  const disabled: string[] = []
  for (const kind of KINDS) {
    for (const item of doc[kind.key]) {
      const { [kind.id]: id, ...body } = item
      const name = String(id)
      const payload = kind.key === 'eventTypes' ? { required: body.required } : body
      try {
        await client.request('PUT', `${base}/${kind.path}/${segment(name)}`, payload)
      } catch (error) {
        if (kind.key === 'destinations' && missingCredentials(error)) {
          // Credentials are never exported: the destination comes over disabled, to be completed there.
          await client.request('PUT', `${base}/${kind.path}/${segment(name)}`, { ...payload, enabled: false })
          disabled.push(name)
          done[kind.key]!++
          continue
        }
        const before = Object.values(done).some(n => n > 0) ? `after importing ${counts(done)}` : 'before importing anything'
        const why = error instanceof Error ? error.message : String(error)
        throw new CliError(`import stopped at ${kind.noun[0]} "${name}" (${before}): ${why}`)
      }
      done[kind.key]!++
    }
  }
  output.out(`Imported into ${account}: ${counts(done)}.\n`)
  if (disabled.length > 0) output.out(`Imported disabled (credentials are never exported; enter them and enable each): ${disabled.join(', ')}.\n`)
}

/** Every item checked, in the target account's context, before the first write: all problems at once, or nothing. */
async function checkWholeFile (client: AdminClient, account: string, base: string, file: string, doc: ExportDocument): Promise<void> {
  const [{ importProblems }, eventTypes, webhooks, destinations] = await Promise.all([
    import('./import-check.js'),
    listAll<Item>(client, `${base}/event-types`, 'eventTypes'),
    listAll<Item>(client, `${base}/webhooks`, 'webhooks'),
    listAll<Item>(client, `${base}/destinations`, 'destinations'),
  ])
  const settings = Object.fromEntries(SETTINGS.filter(key => doc.settings?.[key] !== undefined).map(key => [key, doc.settings![key]]))
  const problems = importProblems({ ...doc, settings }, {
    account,
    eventTypes: new Set(eventTypes.map(type => String(type.name))),
    webhooks: new Map(webhooks.map(webhook => [String(webhook.id), webhook])),
    destinations: new Map(destinations.map(destination => [String(destination.id), destination])),
  })
  if (problems.length === 0) return
  const shown = problems.slice(0, PROBLEMS_SHOWN)
  const more = problems.length > shown.length ? `\n  … and ${problems.length - shown.length} more` : ''
  throw new CliError(`${file}: nothing imported: ${problems.length} problem${problems.length === 1 ? '' : 's'} to fix first:\n${shown.map(line => '  ' + line).join('\n')}${more}`)
}

/** Problems printed at most (a file of a thousand broken items says so in one screen). */
const PROBLEMS_SHOWN = 50

/** A 400 naming credentials: the destination needs them to be enabled. */
function missingCredentials (error: unknown): boolean {
  return error instanceof RefusedError && error.status === 400 && (error.body?.errors ?? []).some(item => item.field?.startsWith('/credentials/') === true)
}

function readDocument (file: string): ExportDocument {
  let parsed: unknown
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'))
  } catch (error) {
    throw new CliError(`cannot read ${file}: ${(error as Error).message}`)
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new CliError(`${file}: not a Beacon export (expected a JSON object)`)
  const doc = parsed as Record<string, unknown>
  if (doc.settings !== undefined && (typeof doc.settings !== 'object' || doc.settings === null || Array.isArray(doc.settings))) {
    throw new CliError(`${file}: "settings" must be an object`)
  }
  for (const kind of KINDS) {
    const list = doc[kind.key] ?? []
    if (!Array.isArray(list)) throw new CliError(`${file}: "${kind.key}" must be a list`)
    list.forEach((item: unknown, i) => {
      if (typeof item !== 'object' || item === null || typeof (item as Item)[kind.id] !== 'string') {
        throw new CliError(`${file}: ${kind.key}[${i}] must be an object with a string "${kind.id}"`)
      }
    })
    doc[kind.key] = list
  }
  return doc as unknown as ExportDocument
}

function counts (done: Record<string, number> | ExportDocument): string {
  return KINDS.map(kind => {
    const value = (done as Record<string, unknown>)[kind.key]
    const n = Array.isArray(value) ? value.length : value as number
    return `${n} ${kind.noun[n === 1 ? 0 : 1]}`
  }).join(', ')
}
