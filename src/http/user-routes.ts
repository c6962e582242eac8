// Panel sign-in (sessions) and the users of an account. Sign-in answers the same 401 for an unknown
// email and a wrong password, after the same scrypt work, and is limited per email and per address.

import { ApiError } from '../errors.js'
import type { Clock } from '../clock.js'
import type { Catalogs } from '../catalog/catalogs.js'
import { Users } from '../users/users.js'
import { SESSION_COOKIE, type Sessions } from '../users/sessions.js'
import { DECOY_HASH, verifyPassword } from '../users/password.js'
import { SignInLimit, type SignInLimiter } from '../users/sign-in-limit.js'
import { normalizeEmail } from '../users/users.js'
import { accountParam, isHttps, principalOf } from './access.js'
import * as S from './schemas.js'
import { validator } from '../validator.js'
import type { Request } from './server.js'
import { EXAMPLE_EMAIL, EXAMPLE_PASSWORD, json, type RouteDefinition } from './route.js'
import * as R from './reply-schemas.js'

const validateSignIn = validator(S.SignIn)
const validateUserCreate = validator(S.UserCreate)
const validateUserPatch = validator(S.UserPatch)

export interface UserRouteDeps {
  catalogs: Catalogs
  users: Users
  sessions: Sessions
  clock: Clock
  /** Where failed sign-ins are counted: this process (default) or, in cluster mode, the cluster. */
  signInLimit?: SignInLimiter
}

export function userRoutes ({ catalogs, users, sessions, clock, signInLimit = new SignInLimit() }: UserRouteDeps): RouteDefinition[] {
  const limit = signInLimit
  const maxAgeS = Math.floor(sessions.ttlMs / 1000)

  function cookie (request: Request, value: string, maxAge: number): string {
    return `${SESSION_COOKIE}=${value}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${maxAge}${isHttps(request) ? '; Secure' : ''}`
  }

  const param = (request: Request, index: number): string => request.params[index] ?? ''

  return [
    {
      method: 'post', pattern: '/admin/session', body: true, role: 'public', audit: { action: 'sign-in', entity: 'user' },
      doc: {
        summary: 'Sign in to the panel',
        description: 'Sets the `beacon_session` cookie (HttpOnly, SameSite=Strict, Path=/, Max-Age; Secure behind https). ' +
          'A wrong email and a wrong password get the same 401. Failed attempts are limited per email and per client address (429, Retry-After).',
        tag: 'Panel',
        body: { schema: S.SignIn, example: { email: EXAMPLE_EMAIL, password: EXAMPLE_PASSWORD } },
        ok: json(200, 'Signed in; the cookie is set.', R.SessionAnswer),
        errors: ['invalid_credentials', 'rate_limited', 'csrf_refused'],
      },
      async handler (request) {
        const { email, password } = validateSignIn(request.body)
        const key = normalizeEmail(email)
        const address = request.remoteAddress
        // Reserved before the password is checked, settled after: a burst cannot try more than the limit.
        const waitMs = await limit.reserve(key, address, clock.nowMs())
        if (waitMs > 0) {
          throw new ApiError('rate_limited', 'Too many failed sign-ins; wait before trying again.', undefined, { 'Retry-After': String(Math.ceil(waitMs / 1000)) })
        }
        const found = users.byEmailForSignIn(key)
        let good: boolean
        try {
          good = await verifyPassword(password, found?.passwordHash ?? DECOY_HASH)
        } catch (error) {
          await limit.settle(key, address, 'untried', clock.nowMs())
          throw error
        }
        if (found === undefined || !good || catalogs.accounts.active(found.user.account) === undefined) {
          await limit.settle(key, address, 'failed', clock.nowMs())
          throw new ApiError('invalid_credentials')
        }
        await limit.settle(key, address, 'succeeded', clock.nowMs())
        const id = await sessions.create(found.user.id)
        return { status: 200, body: { user: Users.public(found.user) }, headers: { 'Set-Cookie': cookie(request, id, maxAgeS) } }
      },
    },
    {
      method: 'get', pattern: '/admin/session', body: false, role: 'public',
      doc: {
        summary: 'Who is signed in', tag: 'Panel',
        ok: json(200, 'The signed-in user.', R.SessionAnswer), errors: ['admin_unauthorized'],
      },
      handler (request) {
        const principal = principalOf(request)
        if (principal?.type !== 'user') throw new ApiError('admin_unauthorized', 'Not signed in.')
        return { status: 200, body: { user: Users.public(principal.user) } }
      },
    },
    {
      method: 'get', pattern: '/admin/session/state', body: false, role: 'public',
      doc: {
        summary: 'Whether anyone is signed in',
        description: 'The panel\'s first call: 200 either way (a signed-out browser is not an error), `signedIn` false without a live session.',
        tag: 'Panel',
        ok: json(200, 'Signed in (with the user) or not.', R.SessionState), errors: [],
      },
      handler (request) {
        const principal = principalOf(request)
        return { status: 200, body: principal?.type === 'user' ? { signedIn: true, user: Users.public(principal.user) } : { signedIn: false } }
      },
    },
    {
      method: 'del', pattern: '/admin/session', body: false, role: 'public', audit: { action: 'revoke', entity: 'user' },
      doc: {
        summary: 'Sign out', description: 'The session ends on the server at once; the cookie is cleared.', tag: 'Panel',
        ok: { status: 204, description: 'Signed out (also when no session was given).' }, errors: ['csrf_refused'],
      },
      async handler (request) {
        const principal = principalOf(request)
        if (principal?.type === 'user') await sessions.revoke(principal.session.key)
        // 204 either way (signing out twice is not an error); the browser drops the cookie.
        return { status: 204, body: undefined, headers: { 'Set-Cookie': cookie(request, '', 0) } }
      },
    },

    {
      method: 'get', pattern: '/admin/accounts/:account/users', body: false, role: 'owner',
      doc: {
        summary: 'List the account\'s panel users', tag: 'Panel',
        ok: json(200, 'The users (never their passwords).', R.UserList), errors: ['account_not_found'],
      },
      handler: request => ({ status: 200, body: { users: users.list(accountParam(request, catalogs)) } }),
    },
    {
      method: 'post', pattern: '/admin/accounts/:account/users', body: true, role: 'owner',
      doc: {
        summary: 'Add a panel user', description: 'Emails are unique across the instance.', tag: 'Panel',
        body: { schema: S.UserCreate, example: { email: 'new@example.com', name: 'New Person', password: 'a long enough password', role: 'editor' } },
        ok: json(201, 'The user.', R.User), errors: ['account_not_found', 'conflict'],
      },
      async handler (request) {
        const spec = validateUserCreate(request.body)
        return { status: 201, body: await users.create(accountParam(request, catalogs), spec) }
      },
    },
    {
      method: 'patch', pattern: '/admin/accounts/:account/users/:id', body: true, role: 'owner',
      doc: {
        summary: 'Rename a user, change their role or password', description: 'An account keeps at least one owner.', tag: 'Panel',
        body: { schema: S.UserPatch, example: { role: 'viewer' } },
        ok: json(200, 'The user.', R.User), errors: ['account_not_found', 'user_not_found', 'conflict'],
      },
      async handler (request) {
        const patch = validateUserPatch(request.body)
        return { status: 200, body: await users.update(accountParam(request, catalogs), param(request, 1), patch) }
      },
    },
    {
      method: 'del', pattern: '/admin/accounts/:account/users/:id', body: false, role: 'owner',
      doc: {
        summary: 'Remove a user', description: 'Their sessions end at once. An account keeps at least one owner.', tag: 'Panel',
        ok: { status: 204, description: 'Removed.' }, errors: ['account_not_found', 'user_not_found', 'conflict'],
      },
      async handler (request) {
        await users.remove(accountParam(request, catalogs), param(request, 1))
        return { status: 204, body: undefined }
      },
    },
  ]
}
