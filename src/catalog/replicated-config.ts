// Cluster mode's configuration: accounts, tokens, event types, campaigns, segments, webhooks and the
// panel users (src/users/users.ts) live in one replicated KV bucket (`BEACON_CONFIG_<cluster>`, src/cluster/config-kv.ts), each row as its
// stored form (msgpack; secrets sealed as in LMDB) under `<kind>.<id>`. Every node watches the bucket
// and applies each record to its local LMDB copy and to the catalogs in memory (Catalogs.apply), which
// recompile and tell their listeners as after a write of their own, or to the users (Users.apply). A change made through a node is
// written to the bucket under its account's lock, and answered once the bucket acknowledged it (a
// quorum with R3) and this node applied it from the watch.
//
// Limits stay exact across the cluster: an account's changes are serialised by a lock in a second
// bucket (`BEACON_CONFIG_LOCKS_<cluster>`, src/cluster/leases.ts: taken by a put into an empty key,
// which JetStream checks exactly on every server version, given back by a delete and a purge, lapsing
// after CONFIG_LOCK_MS if its holder dies). Its holder first waits until it has applied every change
// the bucket holds, so the catalogs in memory count what the cluster has when the limit is checked.
// Users changes share one lock (USERS_SCOPE): an email is unique across every account.

import type { NatsConnection } from '@nats-io/transport-node'
import { Packr } from 'msgpackr'
import { ConfigStore, type ConfigChange, type ConfigKind } from '../cluster/config-kv.js'
import type { EntrySigner } from '../cluster/entry-signer.js'
import { LeaseTable, type Lease } from '../cluster/leases.js'
import { AppliedRevision } from '../cluster/applied-revision.js'
import { partitionOf } from '../cluster/partition.js'
import { retryWhileElecting } from '../cluster/retry.js'
import { ApiError } from '../errors.js'
import { log } from '../log.js'
import type { Key, Store } from '../store/store.js'
import type { Database } from 'lmdb'
import type { Catalogs } from './catalogs.js'
import type { ConfigKey } from './config-rows.js'
import type { ConfigRow, ConfigWriter, Replicated, RowWrite } from '../store/config-writer.js'

/** How long an account's lock lasts if its holder never gives it back (it died): the bucket's TTL. */
export const CONFIG_LOCK_MS = 10_000
/** How long a change waits for its account's lock before it is refused with 503 config_unavailable. */
export const CONFIG_LOCK_WAIT_MS = 5_000
/** How long a change waits to be stored and applied here (past a NATS election) before 503 config_unavailable. */
export const CONFIG_APPLY_WAIT_MS = 10_000
/** Accounts share this many lock keys (by hash): enough that two accounts rarely wait for each other. */
const LOCK_SLOTS = 4096
/** Records deleted at once when an account goes. */
const REMOVE_BATCH = 100

/** Plain msgpack maps (no msgpackr records): any msgpack reader can inspect the bucket. */
const packr = new Packr({ useRecords: false })

export interface ReplicatedConfigOptions {
  nc: NatsConnection
  /** BEACON_CLUSTER: the buckets are BEACON_CONFIG_<cluster> and BEACON_CONFIG_LOCKS_<cluster>. */
  cluster: string
  /** BEACON_REPLICAS. */
  replicas: number
  store: Store
  catalogs: Catalogs
  /** The panel users: their records are configuration too. */
  users: Replicated
  /** Signs the records written and checks those read (src/cluster/entry-signer.ts). */
  signer: EntrySigner
  /** BEACON_CLUSTER_RESIGN: accept unsigned records present at start and write them back signed. */
  resign?: boolean
  /** Tests only: a shorter lock lifetime. */
  lockMs?: number
}

/**
 * Cluster mode on: the catalogs write through the replicated bucket from here on. Resolves once the
 * watch runs; `ready` resolves once this node applied the whole configuration (report ready after it).
 * Without this call (embedded mode) nothing changes.
 */
export async function startReplicatedConfig ({ nc, cluster, replicas, store, catalogs, users, signer, resign = false, lockMs = CONFIG_LOCK_MS }: ReplicatedConfigOptions): Promise<ReplicatedConfig> {
  const records = await ConfigStore.open({ nc, bucket: `BEACON_CONFIG_${cluster}`, replicas, signer, resign })
  const locks = await LeaseTable.open({ nc, bucket: `BEACON_CONFIG_LOCKS_${cluster}`, leaseMs: lockMs, replicas, node: store.nodeId.replace(/[^A-Za-z0-9_-]/g, '_') })
  const replicated = new ReplicatedConfig(records, locks, store, catalogs, users)
  await replicated.start()
  return replicated
}

export class ReplicatedConfig implements ConfigWriter {
  /** Resolves once every record the bucket held when the watch started is applied here. */
  readonly ready: Promise<void>
  private resolveReady!: () => void
  private isReady = false
  /** The highest revision applied here (0 until ready: the first records are applied together). */
  private readonly applied = new AppliedRevision({
    waitMs: CONFIG_APPLY_WAIT_MS,
    timedOut: (revision, waitMs) => unavailable(`revision ${revision} of the configuration was not applied here within ${waitMs} ms`),
  })

  private highest = 0
  /** Until ready: the records seen (their keys) and those applied once the accounts are (rows of accounts first). */
  private seen = new Set<string>()
  private deferred: ConfigChange[] = []
  private watch: { stop (): void } | null = null

  constructor (private readonly records: ConfigStore, private readonly locks: LeaseTable, private readonly store: Store, private readonly catalogs: Catalogs, private readonly users: Replicated) {
    this.ready = new Promise(resolve => { this.resolveReady = resolve })
  }

  /** Seed an empty bucket from this node's store (the first node of a new cluster), then watch it. */
  async start (): Promise<void> {
    await this.seedIfEmpty()
    this.catalogs.replicate(this)
    this.users.replicate(this)
    this.watch = await this.records.watch({ onChange: change => this.received(change), onReady: () => this.caughtUp() })
  }

  async change (scope: string, decide: () => RowWrite[]): Promise<void> {
    const lease = await viaNats('taking the lock', this.lock(scope))
    try {
      // Every change acknowledged before the lock was taken is applied here before the check.
      await this.applied.wait(await viaNats('reading the last revision', this.records.lastRevision()))
      let last = 0
      for (const write of decide()) last = await viaNats('storing the change', this.write(write))
      if (last > 0) await this.applied.wait(last)
    } finally {
      this.locks.release(lease).catch((error: unknown) => log.warn({ err: error, scope }, 'a configuration lock was not given back; it lapses by itself'))
    }
  }

  async removeAll (rows: readonly ConfigRow[]): Promise<void> {
    for (let i = 0; i < rows.length; i += REMOVE_BATCH) {
      await Promise.all(rows.slice(i, i + REMOVE_BATCH).map(row => this.write({ row, value: null })))
    }
  }

  close (): void {
    this.watch?.stop()
    this.applied.close(unavailable('this node is stopping'))
  }

  private async write ({ row, value }: RowWrite): Promise<number> {
    const { kind, id } = recordOf(row)
    return value === null ? this.records.delete(kind, id) : this.records.put(kind, id, packr.pack(value))
  }

  /** Takes the scope's lock, retrying while another node holds it, up to CONFIG_LOCK_WAIT_MS. */
  private async lock (scope: string): Promise<Lease> {
    const lease = await this.locks.acquireWithin(partitionOf(scope, 'config', LOCK_SLOTS), CONFIG_LOCK_WAIT_MS)
    if (lease === null) throw unavailable('another node holds the lock of this account\'s configuration')
    return lease
  }

  private received (change: ConfigChange): void {
    this.highest = Math.max(this.highest, change.revision)
    if (this.isReady) {
      this.applyChange(change)
      this.applied.advance(change.revision)
      return
    }
    // The first records come in the order of their last writes: an account patched after its campaigns
    // comes after them. Accounts are applied as they come, the rest once every account is.
    if (change.value !== null) this.seen.add(`${change.kind}.${change.id}`)
    if (change.kind === 'accounts') this.applyChange(change)
    else this.deferred.push(change)
  }

  private caughtUp (): void {
    for (const change of this.deferred) this.applyChange(change)
    this.deferred = []
    this.removeUnseen()
    this.seen.clear()
    this.isReady = true
    this.applied.advance(this.highest)
    this.resolveReady()
  }

  /** Apply one record to the local store and the catalogs; a record that cannot be applied is logged and skipped. */
  private applyChange (change: ConfigChange): void {
    const row = rowOf(change.kind, change.id)
    if (row === null) return
    try {
      const db = this.dbOf(row)
      // Never decided by reading the store: a put issued here a moment ago may not be committed yet.
      const target = this.targetOf(row)
      if (change.value === null) {
        this.store.ignoreFailure(db.remove(keyOf(row)))
        target.apply(row, null)
        return
      }
      if (!this.isReady) {
        // After a restart the bucket gives back what this node's store already held when its catalogs
        // loaded it: nothing to apply (nor to tell: no needless recompile or re-evaluation).
        const local = db.get(keyOf(row)) as unknown
        if (local !== undefined && this.loadedAtStart(row, local) && Buffer.from(packr.pack(local)).equals(change.value)) return
      }
      const value = packr.unpack(change.value) as unknown
      this.store.ignoreFailure(db.put(keyOf(row), value))
      target.apply(row, value)
    } catch (error) {
      log.error({ err: error, kind: change.kind, id: change.id, revision: change.revision }, 'a replicated configuration record could not be applied on this node')
    }
  }

  /** Rows of the local store the bucket did not hold when this node caught up: removed (changes made while it was away). */
  private removeUnseen (): void {
    const stale: ConfigRow[] = []
    for (const key of this.store.config.getKeys()) {
      const row: ConfigRow = { db: 'config', key: key as ConfigKey }
      // Rows of this node's own (a segment pass's cursor, a schedule's last run) are not configuration.
      if (replicated(row) && !this.seen.has(recordName(row))) stale.push(row)
    }
    for (const key of this.store.tokens.getKeys()) if (!this.seen.has(recordName({ db: 'tokens', key: key as string }))) stale.push({ db: 'tokens', key: key as string })
    for (const key of this.store.users.getKeys()) if (!this.seen.has(recordName({ db: 'users', key: key as string }))) stale.push({ db: 'users', key: key as string })
    // Accounts last: their rows are still known while theirs go.
    for (const key of this.store.accounts.getKeys()) if (!this.seen.has(recordName({ db: 'accounts', key: key as string }))) stale.push({ db: 'accounts', key: key as string })
    for (const row of stale) {
      this.store.ignoreFailure(this.dbOf(row).remove(keyOf(row)))
      this.targetOf(row).apply(row, null)
    }
    if (stale.length > 0) log.info({ rows: stale.length }, 'configuration rows removed from the cluster while this node was away were removed here')
  }

  /**
   * A new cluster's bucket has never been written: the first node to take the installation's lock and
   * find it so puts its own configuration in (a data folder of embedded mode becomes the cluster's).
   * Every other node replaces its rows with the bucket's.
   */
  /**
   * Runs right after the buckets were opened, when a new cluster's buckets may still be electing their
   * leaders (no responders, timeouts): those steps are retried (puts are idempotent), never skipped.
   */
  private async seedIfEmpty (): Promise<void> {
    if (await retryWhileElecting(() => this.records.lastRevision()) > 0) return
    const lease = await retryWhileElecting(() => this.lock(''))
    try {
      if (await retryWhileElecting(() => this.records.lastRevision()) > 0) return
      const writes: RowWrite[] = []
      for (const { key, value } of this.store.accounts.getRange()) writes.push({ row: { db: 'accounts', key: key as string }, value })
      for (const { key, value } of this.store.tokens.getRange()) writes.push({ row: { db: 'tokens', key: key as string }, value })
      for (const { key, value } of this.store.users.getRange()) writes.push({ row: { db: 'users', key: key as string }, value })
      for (const { key, value } of this.store.config.getRange()) {
        const row: ConfigRow = { db: 'config', key: key as ConfigKey }
        if (replicated(row)) writes.push({ row, value })
      }
      for (const write of writes) await retryWhileElecting(() => this.write(write))
      if (writes.length > 0) log.info({ rows: writes.length }, 'the cluster\'s configuration bucket was empty: this node\'s configuration was put in')
    } finally {
      await this.locks.release(lease).catch(() => {})
    }
  }

  private loadedAtStart (row: ConfigRow, local: unknown): boolean {
    // The users load every row of the store at start.
    if (row.db === 'users') return true
    const account = row.db === 'accounts' ? row.key : row.db === 'tokens' ? (local as { account: string }).account : row.key[0]
    return this.catalogs.loadedAtStart.has(account)
  }

  private targetOf (row: ConfigRow): Replicated {
    return row.db === 'users' ? this.users : this.catalogs
  }

  private dbOf (row: ConfigRow): Database {
    return row.db === 'accounts' ? this.store.accounts : row.db === 'tokens' ? this.store.tokens : row.db === 'users' ? this.store.users : this.store.config
  }
}

/** The record kind of each config row kind; an account's segments version is a segments record named by the account alone. */
const KIND_OF_ROW: Readonly<Record<string, ConfigKind>> = {
  'event-type': 'eventTypes', campaign: 'campaigns', segment: 'segments', 'segments-version': 'segments', webhook: 'webhooks', destination: 'destinations',
  'saved-report': 'savedReports', 'report-run': 'reportRuns', backfill: 'backfills',
}
const ROW_OF_KIND: Readonly<Partial<Record<ConfigKind, string>>> = {
  eventTypes: 'event-type', campaigns: 'campaign', segments: 'segment', webhooks: 'webhook', destinations: 'destination',
  savedReports: 'saved-report', reportRuns: 'report-run', backfills: 'backfill',
}

/** A row's record: accounts and tokens by id, config rows by `<account>/<name>` (account ids are UUIDs: no '/'). */
export function recordOf (row: ConfigRow): { kind: ConfigKind, id: string } {
  if (row.db !== 'config') return { kind: row.db, id: row.key }
  const [account, rowKind, name] = row.key
  const kind = Object.hasOwn(KIND_OF_ROW, rowKind) ? KIND_OF_ROW[rowKind] : undefined
  if (kind === undefined) throw new Error(`config rows of kind ${rowKind} are not replicated`)
  return { kind, id: name === undefined ? account : `${account}/${name}` }
}

export function rowOf (kind: ConfigKind, id: string): ConfigRow | null {
  if (kind === 'accounts' || kind === 'tokens' || kind === 'users') return { db: kind, key: id }
  const slash = id.indexOf('/')
  if (slash < 0) return kind === 'segments' ? { db: 'config', key: [id, 'segments-version'] } : null
  const rowKind = ROW_OF_KIND[kind]
  return rowKind === undefined ? null : { db: 'config', key: [id.slice(0, slash), rowKind, id.slice(slash + 1)] }
}

/** The row's key in its db (a config key has its name only when it names one). */
function keyOf (row: ConfigRow): Key {
  return row.key as Key
}

/** Whether the row is configuration (in the bucket), not a row of the node's own kept in the config db. */
function replicated (row: ConfigRow): boolean {
  return row.db !== 'config' || Object.hasOwn(KIND_OF_ROW, row.key[1])
}

function recordName (row: ConfigRow): string {
  const { kind, id } = recordOf(row)
  return `${kind}.${id}`
}

/** A NATS failure (no responders, a timeout during an election) answers 503 config_unavailable, not 500. */
async function viaNats<T> (what: string, step: Promise<T>): Promise<T> {
  try {
    return await step
  } catch (error) {
    if (error instanceof ApiError) throw error
    log.warn({ err: error }, `a configuration change failed while ${what}`)
    throw unavailable(`NATS failed while ${what}`)
  }
}

function unavailable (why: string): ApiError {
  return new ApiError('config_unavailable', `The cluster's configuration cannot be changed right now (${why}); retry shortly.`, undefined, { 'Retry-After': '1' })
}
