// Every admin route, whoever wrote it, is assembled through here (src/app.ts): it gets the access guard
// of its declared role (src/http/access.ts), and each successful change through it writes one audit
// log entry (who, what entity, which id, a short before/after summary) before the answer.

import type { AuditActor, AuditLog } from '../audit/audit-log.js'
import type { Access, Principal } from './access.js'
import type { Reply, Request, Route } from './server.js'

/** Path collections → the entity named in audit entries. */
const ENTITIES: Record<string, string> = {
  campaigns: 'campaign', segments: 'segment', webhooks: 'webhook', 'event-types': 'event-type', tokens: 'token',
  users: 'user', media: 'media', profiles: 'profile', visitors: 'visitor', 'saved-reports': 'saved-report',
}

/**
 * Keys whose values are never written into a summary, whatever their entity: those the API's answers
 * redact (src/webhooks/redact.ts: a webhook header named like a credential, Cookie included) and more.
 */
const SECRET = /password|secret|token|authorization|hash|key|auth|pass|cookie|session|signature|credential/i
const SUMMARY_MAX = 300

export function protectAdminRoutes<R extends Route> (routes: R[], access: Access, audit: AuditLog): R[] {
  const gets = new Map<string, Route>()
  for (const route of routes) if (route.method === 'get') gets.set(route.pattern, route)
  return routes.map(route => {
    if (!route.pattern.startsWith('/admin')) return route
    const guarded: R = { ...route, guard: access.guardFor(route) }
    if (route.method === 'get' || route.method === 'options' || route.audit === false) return guarded
    return { ...guarded, handler: audited(route, gets.get(route.pattern) ?? null, audit) }
  })
}

function audited (route: Route, read: Route | null, audit: AuditLog): Route['handler'] {
  const parts = route.pattern.split('/')
  // /admin/accounts/:account/<collection>/:id/<verb>
  const collection = parts[4]
  const declared = route.audit === false ? undefined : route.audit
  const entity = declared?.entity ?? (collection === undefined ? 'account' : ENTITIES[collection] ?? collection)
  // An erasure's entry must not keep what it erased: no "before" is read (the answer's counts describe it).
  const erases = route.method === 'del' && (collection === 'profiles' || collection === 'visitors')
  return async request => {
    const before = route.method === 'post' || read === null || erases ? null : await readQuietly(read, request)
    const reply = await route.handler(request)
    if (reply.status >= 300) return reply
    const principal = request.auth as Principal | null
    const body = reply.body as Record<string, unknown> | null
    const signedIn = body !== null && typeof body === 'object' ? body.user as { id: string, email: string, account: string } | undefined : undefined
    const actor: AuditActor = signedIn !== undefined
      ? { type: 'user', id: signedIn.id, email: signedIn.email }
      : principal?.type === 'user' ? { type: 'user', id: principal.user.id, email: principal.user.email } : { type: 'admin' }
    const account = request.params[0] ?? (principal?.type === 'user' ? principal.user.account : signedIn?.account ?? String(body?.account ?? ''))
    if (account === '') return reply
    const action = declared?.action ?? actionOf(route, parts, before)
    const entityId = request.params.length > 1
      ? request.params[request.params.length - 1]!
      : String(body?.id ?? signedIn?.id ?? (principal?.type === 'user' ? principal.user.id : body?.account ?? account))
    // What the change made, as the API answered it (secrets redacted as GET shows them, issue 27), or
    // what was sent when the answer is not a record. An upload's bytes are not summarized: its answer is.
    const sent = asRecord(request.body)
    const after = route.method === 'del' ? null : asRecord(body) ?? sent
    // A deletion without a readable "before" is described by its answer (a revoked token, what was erased).
    const was = before ?? (route.method === 'del' ? body : null)
    // A PATCH is summarized by the fields it sent, never by those it left as they were.
    const summary = summarize(action, was, after, entityId, route.method === 'patch' ? sent ?? {} : null)
    await audit.append(account, { actor, action, entity, entityId, summary })
    return reply
  }
}

function actionOf (route: Route, parts: string[], before: unknown): string {
  const last = parts[parts.length - 1]
  if (last === 'replay') return 'replay'
  if (route.method === 'del') return parts[4] === 'tokens' ? 'revoke' : parts[4] === 'profiles' || parts[4] === 'visitors' ? 'erase' : 'delete'
  if (route.method === 'post') return 'create'
  // PUT creates or replaces; PATCH changes what exists.
  return route.method === 'put' && before === null ? 'create' : 'update'
}

/** The entity as its GET route shows it before the change; null when it does not exist (or cannot be read). */
async function readQuietly (read: Route, request: Request): Promise<unknown> {
  try {
    const reply: Reply = await read.handler({ ...request, method: 'get', body: undefined })
    return reply.status === 200 ? reply.body : null
  } catch {
    return null
  }
}

/** What a read adds to a record that a write does not send: counts, and the id or name from the path. */
const DERIVED = new Set(['members'])

/**
 * A line a person reads: what changed (before → after) for an update, the main fields otherwise.
 * `patched`: the fields a PATCH sent (only those are compared; secrets among them named, not shown).
 */
export function summarize (action: string, before: unknown, after: unknown, entityId: string, patched: Record<string, unknown> | null = null): string {
  const b = asRecord(before)
  const a = asRecord(after)
  let text: string
  if (patched !== null) {
    const keys = Object.keys(patched).filter(key => !SECRET.test(key))
    const now = (key: string): unknown => a !== null && key in a ? a[key] : patched[key]
    text = describeChanges(b !== null
      ? keys.filter(key => JSON.stringify(now(key)) !== JSON.stringify(b[key])).map(key => `${key}: ${short(b[key])} → ${short(now(key))}`)
      : keys.map(key => `${key} → ${short(now(key))}`), patched)
  } else if (b !== null && a !== null) {
    // A replacement (PUT) drops the fields it does not send: those show as "→ (none)".
    const dropped = Object.keys(b).filter(key => !(key in a) && !DERIVED.has(key) && b[key] !== entityId)
    const changed = [...Object.keys(a), ...dropped].filter(key => !SECRET.test(key) && JSON.stringify(a[key]) !== JSON.stringify(b[key]))
    text = describeChanges(changed.map(key => `${key}: ${short(b[key])} → ${short(a[key])}`), a)
  } else if (action === 'update' && a !== null) {
    text = describeChanges(Object.keys(a).filter(key => !SECRET.test(key)).map(key => `${key} → ${short(a[key])}`), a)
  } else {
    const shown = a ?? b
    text = shown === null ? action : Object.keys(shown).filter(key => !SECRET.test(key)).map(key => `${key}=${short(shown[key])}`).join(', ')
  }
  return text.length > SUMMARY_MAX ? text.slice(0, SUMMARY_MAX - 1) + '…' : text
}

/** The changes, and a secret sent (a new password) named without its value. */
function describeChanges (changes: string[], sent: Record<string, unknown>): string {
  for (const key of Object.keys(sent)) if (SECRET.test(key) && sent[key] !== undefined) changes.push(`${key} changed`)
  return changes.length === 0 ? 'no field changed' : changes.join(', ')
}

function asRecord (value: unknown): Record<string, unknown> | null {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !Buffer.isBuffer(value) ? value as Record<string, unknown> : null
}

function short (value: unknown): string {
  if (value === undefined) return '(none)'
  const text = JSON.stringify(value, (key, inner: unknown) => key !== '' && SECRET.test(key) ? '[redacted]' : inner) ?? String(value)
  return text.length > 40 ? text.slice(0, 39) + '…' : text
}
