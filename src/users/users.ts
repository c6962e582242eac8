// Panel users: per account, with a role; emails unique across the instance (a user belongs to one
// account). Read once at start and kept in memory like the catalogs (src/catalog); every change is
// written through and awaited before it is answered. In cluster mode users are records of the
// replicated configuration (src/catalog/replicated-config.ts): a change is decided under the users'
// cluster-wide lock (so an email stays unique across nodes), written to the bucket, and applied on
// every node from its watch (`apply`), this one included.

import { randomBytes } from 'node:crypto'
import { ApiError } from '../errors.js'
import { log } from '../log.js'
import type { Clock } from '../clock.js'
import type { Store } from '../store/store.js'
import { hashPassword } from './password.js'
import { assertEmailVisible, assertPasswordAcceptable } from './credentials-policy.js'
import { USERS_SCOPE, type ConfigRow, type ConfigWriter, type Replicated, type RowWrite } from '../store/config-writer.js'

export const ROLES = ['viewer', 'editor', 'owner'] as const
export type Role = typeof ROLES[number]

/** Users per account are bounded (the panel lists them whole). */
export const USERS_MAX = 1000

export interface User {
  id: string
  account: string
  email: string
  name: string
  role: Role
  createdAt: string
}

/** What ends a user's sessions (Sessions fits). */
export interface SessionEnder {
  revokeUser (id: string): void
}

export interface UserPatch {
  name?: string
  role?: Role
  password?: string
}

interface UserRecord extends User {
  passwordHash: string
}

export class Users implements Replicated {
  private readonly store: Store
  private readonly clock: Clock
  private readonly byId = new Map<string, UserRecord>()
  private readonly byEmail = new Map<string, UserRecord>()
  /** Told when a user's sessions must end: the user was removed, or their password changed. */
  private readonly sessions: SessionEnder
  /** Cluster mode: the replicated configuration every change goes through; null in embedded mode. */
  private writer: ConfigWriter | null = null

  constructor (store: Store, clock: Clock, sessions: SessionEnder) {
    this.store = store
    this.clock = clock
    this.sessions = sessions
    for (const { value } of store.users.getRange()) this.remember(value as UserRecord)
  }

  /** The user as the API shows it (never the password hash). */
  static public (record: User): User {
    const { id, account, email, name, role, createdAt } = record
    return { id, account, email, name, role, createdAt }
  }

  get (id: string): User | undefined { return this.byId.get(id) }

  replicate (writer: ConfigWriter): void {
    this.writer = writer
  }

  /** Cluster mode: a user's record changed in the replicated configuration (null: removed). */
  apply (row: ConfigRow, value: unknown): void {
    const before = this.byId.get(row.key as string)
    if (before !== undefined) this.forget(before)
    if (value !== null) this.remember(value as UserRecord)
  }

  /** The user with this email (any case) and their password hash, for sign-in. */
  byEmailForSignIn (email: string): { user: User, passwordHash: string } | undefined {
    const record = this.byEmail.get(normalizeEmail(email))
    return record === undefined ? undefined : { user: record, passwordHash: record.passwordHash }
  }

  list (account: string): User[] {
    const out: User[] = []
    for (const record of this.byId.values()) if (record.account === account) out.push(Users.public(record))
    return out
  }

  inAccount (account: string, id: string): User {
    const record = this.byId.get(id)
    if (record === undefined || record.account !== account) throw new ApiError('user_not_found')
    return record
  }

  async create (account: string, spec: { email: string, name?: string, password: string, role: Role }): Promise<User> {
    assertEmailVisible(spec.email)
    assertPasswordAcceptable(spec.password)
    const email = normalizeEmail(spec.email)
    this.checkNew(account, email)
    const record: UserRecord = {
      id: randomBytes(9).toString('base64url'),
      account,
      email,
      name: spec.name ?? '',
      role: spec.role,
      createdAt: new Date(this.clock.nowMs()).toISOString(),
      passwordHash: await hashPassword(spec.password),
    }
    if (this.writer !== null) {
      // Checked again under the lock, with every change of the cluster applied here: exact.
      await this.writer.change(USERS_SCOPE, () => {
        this.checkNew(account, email)
        return [write(record)]
      })
      return Users.public(record)
    }
    // Checked again: another creation with the same email may have finished while the hash was computed.
    if (this.byEmail.has(email)) throw new ApiError('conflict', 'A user with this email exists already.', '/email')
    this.remember(record)
    try {
      await this.store.save(this.store.users, record.id, record)
    } catch (error) {
      this.forget(record)
      throw error
    }
    return Users.public(record)
  }

  async update (account: string, id: string, patch: UserPatch): Promise<User> {
    const current = this.inAccount(account, id) as UserRecord
    this.checkPatch(account, current, patch)
    if (patch.password !== undefined) assertPasswordAcceptable(patch.password)
    const passwordHash = patch.password === undefined ? undefined : await hashPassword(patch.password)
    if (this.writer !== null) {
      // Made under the users' lock to the user as the cluster has it then.
      await this.writer.change(USERS_SCOPE, () => {
        const latest = this.inAccount(account, id) as UserRecord
        this.checkPatch(account, latest, patch)
        return [write(patched(latest, patch, passwordHash))]
      })
    } else {
      if (this.byId.get(id) !== current) throw new ApiError('conflict', 'The user changed meanwhile; try again.')
      const next = patched(current, patch, passwordHash)
      await this.store.save(this.store.users, id, next)
      this.remember(next)
    }
    // A new password ends the sessions signed in with the old one.
    if (patch.password !== undefined) this.sessions.revokeUser(id)
    return Users.public(this.inAccount(account, id))
  }

  async remove (account: string, id: string): Promise<User> {
    const current = this.removable(account, id)
    if (this.writer !== null) {
      await this.writer.change(USERS_SCOPE, () => {
        this.removable(account, id)
        return [{ row: { db: 'users', key: id }, value: null }]
      })
      // Every node refuses the user's sessions once it applied the removal; their entries go too.
      this.sessions.revokeUser(id)
      return Users.public(current)
    }
    // Gone from memory first: "at once" means no request is accepted for this user from here on.
    this.forget(current)
    this.sessions.revokeUser(id)
    await this.store.durable(this.store.users.remove(id))
    return Users.public(current)
  }

  /** Every user of an account being deleted: gone at once with their sessions (the last owner too). */
  async removeAccount (account: string): Promise<number> {
    const leaving = [...this.byId.values()].filter(record => record.account === account)
    for (const record of leaving) {
      this.forget(record)
      this.sessions.revokeUser(record.id)
    }
    // Cluster mode: every node's deletion job runs this (idempotent deletes, no check to make: no lock),
    // in the background like the account's other records: a NATS failure does not stop the job. Records
    // every node failed to delete stay in the bucket, unusable (their account is gone), their emails taken.
    if (this.writer !== null) {
      this.writer.removeAll(leaving.map(record => ({ db: 'users', key: record.id }))).catch((error: unknown) => {
        log.error({ err: error, account }, 'removing a deleted account\'s users from the cluster failed')
      })
      return leaving.length
    }
    let last: Promise<boolean> | null = null
    for (const record of leaving) last = this.store.users.remove(record.id)
    if (last !== null) await this.store.durable(last)
    return leaving.length
  }

  private checkPatch (account: string, current: UserRecord, patch: UserPatch): void {
    if (patch.role !== undefined && patch.role !== 'owner' && current.role === 'owner') this.keepAnOwner(account, current.id)
  }

  private checkNew (account: string, email: string): void {
    if (this.byEmail.has(email)) throw new ApiError('conflict', 'A user with this email exists already.', '/email')
    if (this.list(account).length >= USERS_MAX) throw new ApiError('conflict', `An account has at most ${USERS_MAX} users; remove some first.`)
  }

  private removable (account: string, id: string): UserRecord {
    const current = this.inAccount(account, id) as UserRecord
    if (current.role === 'owner') this.keepAnOwner(account, id)
    return current
  }

  /** An account keeps at least one owner once it has one (the admin key can always add another). */
  private keepAnOwner (account: string, leaving: string): void {
    for (const record of this.byId.values()) if (record.account === account && record.role === 'owner' && record.id !== leaving) return
    throw new ApiError('conflict', 'This is the account\'s last owner: make another user owner first.')
  }

  private remember (record: UserRecord): void {
    this.byId.set(record.id, record)
    this.byEmail.set(record.email, record)
  }

  private forget (record: UserRecord): void {
    this.byId.delete(record.id)
    if (this.byEmail.get(record.email) === record) this.byEmail.delete(record.email)
  }
}

function patched (current: UserRecord, patch: UserPatch, passwordHash: string | undefined): UserRecord {
  const next: UserRecord = { ...current }
  if (patch.name !== undefined) next.name = patch.name
  if (patch.role !== undefined) next.role = patch.role
  if (passwordHash !== undefined) next.passwordHash = passwordHash
  return next
}

function write (record: UserRecord): RowWrite {
  return { row: { db: 'users', key: record.id }, value: record }
}

export function normalizeEmail (email: string): string {
  return email.trim().toLowerCase()
}
