// Beacon's error items in the words of the panel's forms: the field a JSON pointer names
// (`/trigger/events/0`) as its label ("Trigger event #1"), and no API path in the message (the server's
// messages are written for API callers: "define it first (PUT /admin/accounts/{account}/event-types/x)").

export interface ErrorItem { code?: string, field?: string, message?: string }

const WORDS: Record<string, string> = {
  trigger: 'Trigger',
  events: 'event',
  platforms: 'platform',
  devices: 'device',
  paths: 'path',
  rule: 'Condition',
  all: 'part',
  any: 'part',
  not: 'negated',
  fact: 'fact',
  op: 'operator',
  frequencyCap: 'Frequency cap',
  max: 'at most',
  per: 'per',
  content: 'Content',
  variants: 'Variant',
  goals: 'Goal',
  trafficPercent: 'Traffic',
  allocation: 'Allocation',
  startsAt: 'Starts at',
  endsAt: 'Ends at',
  url: 'URL',
  timeoutMs: 'timeout (ms)',
  maxAttempts: 'max attempts',
  windowDays: 'window (days)',
}

/** A camelCase key in words; any other key (a header's name, an attribute's) as it is. */
const humanize = (key: string): string => WORDS[key] ?? (/^[a-z][A-Za-z0-9]*$/.test(key) ? key.replace(/([a-z0-9])([A-Z])/g, '$1 $2').toLowerCase() : key)

/** `/trigger/events/0` → `Trigger event #1`; `/frequencyCap/max` → `Frequency cap at most`. */
export function plainField (pointer: string): string {
  const parts = pointer.split('/').filter(p => p !== '').map(p => p.replace(/~1/g, '/').replace(/~0/g, '~'))
  const words = parts.map(p => /^\d+$/.test(p) ? `#${Number(p) + 1}` : humanize(p))
  const text = words.join(' ')
  return text.charAt(0).toUpperCase() + text.slice(1)
}

/** The message without the request it names: an API path means nothing in the panel. */
export function plainMessage (item: ErrorItem): string {
  let message = item.message ?? ''
  if (item.code === 'unknown_event_type') {
    const name = /"([^"]+)"/.exec(message)?.[1]
    return name === undefined ? 'This event type is not defined: add it on the Events page first.' : `The event type "${name}" is not defined: add it on the Events page first.`
  }
  // "(PUT /admin/accounts/{account}/event-types/x)", "(GET /admin/…)": the API call the message suggests.
  message = message.replace(/\s*\((?:GET|PUT|POST|PATCH|DELETE) \/[^)]*\)/g, '')
  const field = item.field ?? ''
  if (field !== '') {
    const path = field.replace(/^\//, '')
    const last = path.slice(path.lastIndexOf('/') + 1)
    // "delivery/timeoutMs is required." → "is required."; "max must be …" → "must be …" (the label says which).
    if (message.startsWith(`${path} `)) message = message.slice(path.length + 1)
    else if (message.startsWith(`${last} `)) message = message.slice(last.length + 1)
    message = message.split(field).join('').split(path).join(plainField(field).toLowerCase())
  }
  message = message.trim()
  return message.charAt(0).toUpperCase() + message.slice(1)
}

/** One line for all the items: "Trigger event #1: The event type … ; Name: Must not be empty". */
export function plainErrors (items: readonly ErrorItem[]): string {
  return items.map(item => item.field !== undefined && item.field !== '' ? `${plainField(item.field)}: ${plainMessage(item)}` : plainMessage(item)).join('; ')
}
