// Who may call an admin route. Every /admin/... route gets this guard, whoever wrote it: either the
// admin key (Authorization: Bearer, the super-admin: every account) or a panel session (the cookie),
// which reaches only its own account (/admin/accounts/<own>...) and only routes its role allows. A
// route declares the least role it needs (`role` on the route); a route that declares none is for
// owners and the admin key only, so a route added without thinking about roles is never open to
// viewers. With a session, a change (any method but GET) must also carry the site's own Origin
// (CSRF: a cookie is sent by the browser whoever made the page).

import { createHash, timingSafeEqual } from 'node:crypto'
import { ApiError } from '../errors.js'
import type { Role, User, Users } from '../users/users.js'
import type { Session, Sessions } from '../users/sessions.js'
import type { AccountCatalog } from '../catalog/accounts.js'
import type { GuardRequest, Request, Route, RouteRole } from './server.js'

export type Principal =
  | { type: 'admin' }
  | { type: 'user', user: User, session: Session }

const ADMIN: Principal = Object.freeze({ type: 'admin' })

const RANK: Record<Role, number> = { viewer: 1, editor: 2, owner: 3 }

/** What a role requirement means, for the docs and the role test: which user roles may call it. */
export function rolesAllowed (role: RouteRole | undefined): Role[] {
  const need = role ?? 'owner'
  if (need === 'admin') return []
  if (need === 'public') return ['viewer', 'editor', 'owner']
  return (Object.keys(RANK) as Role[]).filter(r => RANK[r] >= RANK[need])
}

export interface AccessDeps {
  adminKey: string
  users: Users
  sessions: Sessions
  /** A suspended account's users are signed out (their sessions are refused until it is active again). */
  accountActive: (account: string) => boolean
}

export class Access {
  private readonly expected: Buffer
  private readonly users: Users
  private readonly sessions: Sessions
  private readonly accountActive: (account: string) => boolean

  constructor ({ adminKey, users, sessions, accountActive }: AccessDeps) {
    this.expected = digest(`Bearer ${adminKey}`)
    this.users = users
    this.sessions = sessions
    this.accountActive = accountActive
  }

  /** The guard of one admin route, from its declared role. */
  guardFor (route: Route): (request: GuardRequest) => Principal | null {
    const need = route.role ?? 'owner'
    // Only routes under /admin/accounts/:account are ever open to a session (its own account).
    const scoped = route.pattern === '/admin/accounts/:account' || route.pattern.startsWith('/admin/accounts/:account/')
    return request => {
      if (need === 'public') return this.optional(request)
      if (request.authorization !== '') return this.adminKey(request.authorization)
      const principal = this.session(request)
      if (principal === null) throw new ApiError('admin_unauthorized', 'Sign in to the panel, or send "Authorization: Bearer <admin key>".')
      if (changes(request.method)) checkOrigin(request)
      const user = principal.user
      if (need === 'admin' || !scoped || request.params[0] !== user.account || RANK[user.role] < RANK[need]) {
        throw new ApiError('role_forbidden', need === 'admin' || !scoped || request.params[0] !== user.account
          ? 'This is outside your account: only the admin key may do it.'
          : `This needs the ${need} role; you are ${user.role}.`)
      }
      return principal
    }
  }

  private adminKey (authorization: string): Principal {
    if (!timingSafeEqual(digest(authorization), this.expected)) throw new ApiError('admin_unauthorized')
    return ADMIN
  }

  /**
   * For public admin routes (sign-in, sign-out): who is calling if anyone, the session first (these
   * routes are about it); a change made with a session still needs the Origin.
   */
  private optional (request: GuardRequest): Principal | null {
    const principal = this.session(request)
    if (principal === null) return request.authorization === '' ? null : this.adminKey(request.authorization)
    if (changes(request.method)) checkOrigin(request)
    return principal
  }

  private session (request: GuardRequest): (Principal & { type: 'user' }) | null {
    const session = this.sessions.fromCookie(request.cookie)
    if (session === null) return null
    const user = this.users.get(session.userId)
    if (user === undefined || !this.accountActive(user.account)) return null
    return { type: 'user', user, session }
  }
}

/** The account of an /admin/accounts/:account/... route, checked to exist (404 account_not_found). */
export function accountParam (request: Request, catalogs: { accounts: Pick<AccountCatalog, 'get'> }): string {
  const account = request.params[0] ?? ''
  catalogs.accounts.get(account)
  return account
}

/** The caller, in a handler of a guarded route. */
export function principalOf (request: Request): Principal | null {
  return (request.auth as Principal | null | undefined) ?? null
}

function changes (method: string): boolean {
  return method !== 'get' && method !== 'head' && method !== 'options'
}

/** The request's own origin: the scheme the client used (X-Forwarded-Proto behind a proxy) and Host. */
export function ownOrigin (request: Pick<GuardRequest, 'forwardedProto' | 'host'>): string {
  return `${isHttps(request) ? 'https' : 'http'}://${request.host}`
}

export function isHttps (request: Pick<GuardRequest, 'forwardedProto'>): boolean {
  return request.forwardedProto.split(',')[0]!.trim().toLowerCase() === 'https'
}

function checkOrigin (request: GuardRequest): void {
  if (request.origin === '' || request.host === '' || request.origin.toLowerCase() !== ownOrigin(request).toLowerCase()) {
    throw new ApiError('csrf_refused')
  }
}

function digest (text: string): Buffer {
  return createHash('sha256').update(text).digest()
}
