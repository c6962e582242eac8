// Panel sign-in (sessions) and the users of an account. Sign-in answers the same 401 for an unknown
// email and a wrong password, after the same scrypt work, and is limited per email and per address.

import { ApiError } from '../errors.js'
import type { Clock } from '../clock.js'
import type { Registry } from '../store/registry.js'
import { Users } from '../users/users.js'
import { SESSION_COOKIE, type Sessions } from '../users/sessions.js'
import { DECOY_HASH, verifyPassword } from '../users/password.js'
import { SignInLimit } from '../users/sign-in-limit.js'
import { normalizeEmail } from '../users/users.js'
import { accountParam, isHttps, principalOf } from './access.js'
import * as S from './schemas.js'
import { validator } from './validate.js'
import type { Request, Route } from './server.js'

const validateSignIn = validator(S.SignIn)
const validateUserCreate = validator(S.UserCreate)
const validateUserPatch = validator(S.UserPatch)

export interface UserRouteDeps {
  registry: Registry
  users: Users
  sessions: Sessions
  clock: Clock
}

export function userRoutes ({ registry, users, sessions, clock }: UserRouteDeps): Route[] {
  const limit = new SignInLimit()
  const maxAgeS = Math.floor(sessions.ttlMs / 1000)

  function cookie (request: Request, value: string, maxAge: number): string {
    return `${SESSION_COOKIE}=${value}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${maxAge}${isHttps(request) ? '; Secure' : ''}`
  }

  const param = (request: Request, index: number): string => request.params[index] ?? ''

  return [
    {
      method: 'post', pattern: '/admin/session', body: true, role: 'public', audit: { action: 'sign-in', entity: 'user' },
      async handler (request) {
        const { email, password } = validateSignIn(request.body)
        const key = normalizeEmail(email)
        const waitMs = limit.waitMs(key, request.remoteAddress, clock.nowMs())
        if (waitMs > 0) {
          throw new ApiError('rate_limited', 'Too many failed sign-ins; wait before trying again.', undefined, { 'Retry-After': String(Math.ceil(waitMs / 1000)) })
        }
        const found = users.byEmailForSignIn(key)
        const good = await verifyPassword(password, found?.passwordHash ?? DECOY_HASH)
        if (found === undefined || !good || registry.activeAccount(found.user.account) === undefined) {
          limit.failed(key, request.remoteAddress, clock.nowMs())
          throw new ApiError('invalid_credentials')
        }
        limit.succeeded(key)
        const id = await sessions.create(found.user.id)
        return { status: 200, body: { user: Users.public(found.user) }, headers: { 'Set-Cookie': cookie(request, id, maxAgeS) } }
      },
    },
    {
      method: 'get', pattern: '/admin/session', body: false, role: 'public',
      handler (request) {
        const principal = principalOf(request)
        if (principal?.type !== 'user') throw new ApiError('admin_unauthorized', 'Not signed in.')
        return { status: 200, body: { user: Users.public(principal.user) } }
      },
    },
    {
      method: 'del', pattern: '/admin/session', body: false, role: 'public', audit: { action: 'revoke', entity: 'user' },
      async handler (request) {
        const principal = principalOf(request)
        if (principal?.type === 'user') await sessions.revoke(principal.session.key)
        // 204 either way (signing out twice is not an error); the browser drops the cookie.
        return { status: 204, body: undefined, headers: { 'Set-Cookie': cookie(request, '', 0) } }
      },
    },

    {
      method: 'get', pattern: '/admin/accounts/:account/users', body: false, role: 'owner',
      handler: request => ({ status: 200, body: { users: users.list(accountParam(request, registry)) } }),
    },
    {
      method: 'post', pattern: '/admin/accounts/:account/users', body: true, role: 'owner',
      async handler (request) {
        const spec = validateUserCreate(request.body)
        return { status: 201, body: await users.create(accountParam(request, registry), spec) }
      },
    },
    {
      method: 'patch', pattern: '/admin/accounts/:account/users/:id', body: true, role: 'owner',
      async handler (request) {
        const patch = validateUserPatch(request.body)
        return { status: 200, body: await users.update(accountParam(request, registry), param(request, 1), patch) }
      },
    },
    {
      method: 'del', pattern: '/admin/accounts/:account/users/:id', body: false, role: 'owner',
      async handler (request) {
        await users.remove(accountParam(request, registry), param(request, 1))
        return { status: 204, body: undefined }
      },
    },
  ]
}
