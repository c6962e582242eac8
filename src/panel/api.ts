// The one client of the admin API: same-origin fetch with the session cookie, a timeout on every
// request (no spinner waits forever), and Beacon's error body turned into an ApiFailure whose message
// the pages show as is.

import { signal } from '@preact/signals'
import { plainErrors } from './plain-errors'

export type Role = 'owner' | 'editor' | 'viewer'

export interface User {
  id: string
  account: string
  email: string
  name?: string
  role: Role
  createdAt: string
}

/** The signed-in user: undefined while the session is being checked, null when signed out. */
export const user = signal<User | null | undefined>(undefined)

/** The signed-in user's account name, shown in the header (null until it is read). */
export const accountName = signal<string | null>(null)

export const TIMEOUT_MS = 15_000

export class ApiFailure extends Error {
  constructor (message: string, readonly status: number, readonly code: string, readonly field?: string) {
    super(message)
  }
}

interface ErrorBody { message?: string, errors?: { code?: string, field?: string, message?: string }[] }

export interface CallOptions {
  /** Raw bytes (uploads) sent as they are instead of a JSON body. */
  raw?: Blob
  /** Answer the body as text (CSV). */
  text?: boolean
}

export async function call<T = any> (method: string, path: string, body?: unknown, options: CallOptions = {}): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' }
  let payload: BodyInit | undefined
  if (options.raw !== undefined) {
    payload = options.raw
    headers['content-type'] = options.raw.type === '' ? 'application/octet-stream' : options.raw.type
  } else if (body !== undefined) {
    payload = JSON.stringify(body)
    headers['content-type'] = 'application/json'
  }
  let res: Response
  try {
    res = await fetch(path, { method, headers, body: payload, credentials: 'same-origin', signal: AbortSignal.timeout(TIMEOUT_MS) })
  } catch (error) {
    const timedOut = error instanceof DOMException && error.name === 'TimeoutError'
    throw new ApiFailure(timedOut ? `Beacon did not answer within ${TIMEOUT_MS / 1000} s.` : 'Beacon cannot be reached.', 0, timedOut ? 'timeout' : 'network')
  }
  const text = await res.text()
  if (res.ok) {
    if (options.text === true) return text as T
    return (text === '' ? null : JSON.parse(text)) as T
  }
  let parsed: ErrorBody = {}
  try { parsed = JSON.parse(text) as ErrorBody } catch { /* not JSON: the status line says enough */ }
  const first = parsed.errors?.[0]
  // In the forms' words: the field's label, never an API path (plain-errors.ts).
  const detail = parsed.errors !== undefined && parsed.errors.length > 0
    ? plainErrors(parsed.errors)
    : parsed.message ?? `${res.status} ${res.statusText}`
  const failure = new ApiFailure(detail, res.status, first?.code ?? 'http_error', first?.field)
  if (res.status === 401 && failure.code === 'admin_unauthorized' && !path.startsWith('/admin/session')) user.value = null
  return Promise.reject(failure)
}

/** `/admin/accounts/<the signed-in user's account><rest>`. */
export function accountPath (rest = ''): string {
  return `/admin/accounts/${encodeURIComponent(user.value?.account ?? '')}${rest}`
}

export const enc = encodeURIComponent

const RANK: Record<Role, number> = { viewer: 0, editor: 1, owner: 2 }

/** Whether the signed-in user's role is at least `role` (the server checks too). */
export function can (role: Role): boolean {
  const current = user.value
  return current != null && RANK[current.role] >= RANK[role]
}
