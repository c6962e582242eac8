// Panel sessions in tests: create users with the admin key, sign in, and call the admin API with the
// session cookie (and the Origin a browser would send) instead of the admin key.

import { admin, type Answer } from './beacon.js'

export const PASSWORD = 'correct horse battery staple'

export interface SignedIn {
  cookie: string
  user: { id: string, account: string, email: string, role: string }
  /** The Set-Cookie header of the sign-in answer. */
  setCookie: string
}

export async function addUser (base: string, account: string, email: string, role: string, password = PASSWORD): Promise<{ id: string }> {
  const res = await admin(base, 'POST', `/admin/accounts/${account}/users`, { email, password, role })
  if (res.status !== 201) throw new Error(`user creation failed: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body
}

export async function signIn (base: string, email: string, password = PASSWORD, headers: Record<string, string> = {}): Promise<Answer & { signedIn: SignedIn | null }> {
  const res = await fetch(base + '/admin/session', {
    method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ email, password }),
  })
  const text = await res.text()
  const body = text === '' ? null : JSON.parse(text)
  const setCookie = res.headers.get('set-cookie') ?? ''
  const cookie = /^(beacon_session=[^;]*)/.exec(setCookie)?.[1] ?? ''
  return { status: res.status, headers: res.headers, body, signedIn: res.status === 200 ? { cookie, user: body.user, setCookie } : null }
}

/** Call the admin API with a session cookie; changes carry `origin` (default: the server's own). */
export async function asUser (base: string, cookie: string, method: string, path: string, body?: unknown, init: { origin?: string | null, headers?: Record<string, string>, raw?: Buffer, contentType?: string } = {}): Promise<Answer> {
  const headers: Record<string, string> = { cookie, ...init.headers }
  const origin = init.origin === undefined ? base : init.origin
  if (origin !== null) headers.origin = origin
  if (init.raw !== undefined) headers['content-type'] = init.contentType ?? 'application/octet-stream'
  else if (body !== undefined) headers['content-type'] = 'application/json'
  const res = await fetch(base + path, { method, headers, body: init.raw ?? (body === undefined ? undefined : JSON.stringify(body)) })
  const text = await res.text()
  let parsed: unknown = text
  try { parsed = text === '' ? null : JSON.parse(text) } catch {}
  return { status: res.status, headers: res.headers, body: parsed }
}
