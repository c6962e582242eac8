// The LMDB environment: one per node, named databases per kind of record, msgpackr values.
//
// Writes go through lmdb-js's asynchronous batching: every put issued in the same event turn lands in
// the same transaction (`eventTurnBatching`, on by default), so an actor's state row and the rows that
// must travel with it (its outbox rows) are atomic. A put's promise resolves at commit; with
// `separateFlushed` it also carries `.flushed`, resolved once the OS reports the sync. Which of the two
// a write waits for before it is acknowledged is BEACON_DURABILITY.
//
// Values are msgpack records. The rows written on every event (visitors, profiles) share their record
// structures: each shape of Beacon's own records is described once, in the meta db, instead of in every
// value (half the bytes, about twice as fast to encode and three times to decode). Only shapes made of
// Beacon's field names are shared (a db holds 32 at most): maps keyed by site data (attributes, counts,
// event fields) are plain msgpack maps. Outbox rows and delivery records are the bytes of their own
// codec (record-codec.ts), stored as msgpack bins; a record's are also what it is published as.

import { randomUUID } from 'node:crypto'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { open, type Database, type DatabaseOptions, type RootDatabase } from 'lmdb'
import type { Durability } from '../config.js'
import { asStored, encodeRow, type OutboxRow, type RowOrigin } from './record-codec.js'
import { lockDataFolder, type DataLock } from './data-lock.js'
import { restrict, restrictOwnFolder } from './file-modes.js'
import { resolveSecretsKeys, SecretBox } from './secrets.js'
import type { Listeners } from '../listeners.js'

export type Key = string | (string | number)[]

/**
 * Told of every outbox row appended (the delivery hub's relay wakes up and keeps the row), with its
 * origin when it is a row resent for another node (appendOutbox), null otherwise.
 */
export type OutboxAppended = (seq: number, row: OutboxRow, bytes: Uint8Array, origin: RowOrigin | null) => void
/** Told how long an awaited write took to become durable (metrics). */
export type DurableObserved = (durationMs: number) => void

/** Sorts after every id Beacon keys by (UUIDs, names, webhook ids: ASCII): `[prefix, KEY_PART_MAX]` ends a prefix's range. */
export const KEY_PART_MAX = '\uffff'

export interface StoreOptions {
  path: string
  durability: Durability
  mapSizeBytes?: number
  /** BEACON_SECRETS_KEY (null or absent: the data folder's secrets.key, generated on first start). */
  secretsKey?: string | null
  /** The keys themselves, the first sealing (a rotation); overrides secretsKey. */
  secretKeys?: Buffer[]
  /** Who hears of outbox rows appended (the delivery hub joins when it starts); absent: nobody. */
  outboxAppended?: Listeners<OutboxAppended>
  /** Who hears how long durable writes took (metrics); absent or empty costs nothing. */
  durableObserved?: Listeners<DurableObserved>
}

export class Store {
  readonly root: RootDatabase
  readonly accounts: Database
  readonly tokens: Database
  /** Per-account configuration: key [account, kind, name] (event types, campaigns, segments, webhooks). */
  readonly config: Database
  readonly visitors: Database
  readonly profiles: Database
  /** Rows that must reach the outside (audience changes, webhook deliveries): key = sequence number. */
  readonly outbox: Database
  /**
   * Cluster mode: the outbox rows this node resends for another (a partition taken over), key = their
   * seq here, value [origin node, origin seq]: where they were first written, which names the webhook-id
   * their deliveries are sent under.
   */
  readonly outboxOrigins: Database
  /** When an entity's segment windows next expire: key [dueMs, account, kind, id], value null. */
  readonly expiries: Database
  /** Who is in which segment: key [account, segment, 'visitor' | 'profile', id], value null. */
  readonly members: Database
  /** Webhook deliveries and their attempts: key [account, webhookId, outbox seq]. */
  readonly deliveries: Database
  /**
   * Every visitor ever linked to a profile, uncapped (a profile's own list keeps its latest devices
   * only): key [account, profileId, visitorId], value null. What erasure and export follow.
   */
  readonly links: Database
  /** Panel users: key = user id (src/users/users.ts). */
  readonly users: Database
  /** Panel sessions: key = SHA-256 of the session id, hex (the id itself is never stored). */
  readonly sessions: Database
  /** The audit log of admin changes: key [account, seq] (src/audit/audit-log.ts). */
  readonly audit: Database
  /** Uploaded images: key [account, 'meta' | 'data', id] (src/media/media-store.ts). */
  readonly media: Database
  /** Report counters folded from memory and segment member counts: key [account, granularity, bucketMs] / [account, 'members', segment]. */
  readonly reports: Database
  /**
   * The answers of writes made with an Idempotency-Key: key [account, scope] (src/store/idempotency.ts),
   * written in the transaction of the write they answer.
   */
  readonly idempotency: Database
  /** When those answers expire: key [expiresAtMs, account, scope], value null (what the sweep walks). */
  readonly idempotencyExpiries: Database
  /**
   * The retained event log: key [account, timeMs, seq], one row per accepted event, put in the
   * transaction of the visitor's state write (src/store/event-log.ts).
   */
  readonly events: Database
  /** Bulk imports: key [account, id], the job's record (src/jobs/import-jobs.ts). */
  readonly imports: Database
  /** The store's own bookkeeping: the sequence numbers reserved so far, the node id, the shared record structures. */
  readonly meta: Database
  /**
   * This data folder's id, made on its first start: sequence numbers are unique within one folder
   * only, so what several nodes share (JetStream message ids) carries it too.
   */
  readonly nodeId: string
  private readonly outboxAppended: Listeners<OutboxAppended> | null
  private readonly durableObserved: Listeners<DurableObserved> | null
  readonly durability: Durability
  /** Seals secrets before they are written and opens them after they are read (secrets.ts). */
  readonly secrets: SecretBox
  private outboxSeq: number
  private seqReserved: number
  private closed = false
  private lastIgnored: Promise<boolean> | null = null
  private lastDurableWrite: Promise<boolean> | null = null
  private lastDurable: Promise<void> | null = null
  private lastReport: ((error: unknown) => void) | null = null
  private readonly lock: DataLock

  constructor ({ path, durability, mapSizeBytes, secretsKey = null, secretKeys, outboxAppended, durableObserved }: StoreOptions) {
    this.outboxAppended = outboxAppended ?? null
    this.durableObserved = durableObserved ?? null
    // The folder and its files hold visitors' data and webhook credentials: owner only.
    mkdirSync(path, { recursive: true, mode: 0o700 })
    restrictOwnFolder(path)
    this.lock = lockDataFolder(path)
    try {
      this.secrets = new SecretBox(secretKeys ?? resolveSecretsKeys(path, secretsKey).keys)
      this.root = open({
        path,
        // Always a folder: lmdb-js would take a path with an extension (`/srv/beacon.data`) for a file.
        noSubdir: false,
        separateFlushed: true,
        maxDbs: 32,
        ...(mapSizeBytes ? { mapSize: mapSizeBytes } : {}),
      })
    } catch (error) {
      this.lock.release()
      throw error
    }
    // LMDB creates its files with mode 0644 less the umask; those of earlier releases are tightened too.
    for (const file of LMDB_FILES) restrict(join(path, file), 0o600)
    this.meta = this.root.openDB('meta', {})
    this.accounts = this.root.openDB('accounts', {})
    this.tokens = this.root.openDB('tokens', {})
    this.config = this.root.openDB('config', {})
    this.visitors = this.root.openDB('visitors', sharedStructures(this.meta, 'visitors'))
    this.profiles = this.root.openDB('profiles', sharedStructures(this.meta, 'profiles'))
    this.outbox = this.root.openDB('outbox', sharedStructures(this.meta, 'outbox'))
    this.outboxOrigins = this.root.openDB('outbox-origins', {})
    this.expiries = this.root.openDB('expiries', {})
    this.deliveries = this.root.openDB('deliveries', sharedStructures(this.meta, 'deliveries'))
    this.members = this.root.openDB('members', {})
    this.links = this.root.openDB('links', {})
    this.users = this.root.openDB('users', {})
    this.sessions = this.root.openDB('sessions', {})
    this.audit = this.root.openDB('audit', {})
    this.media = this.root.openDB('media', {})
    this.reports = this.root.openDB('reports', {})
    this.idempotency = this.root.openDB('idempotency', {})
    this.idempotencyExpiries = this.root.openDB('idempotency-expiries', {})
    this.events = this.root.openDB('events', sharedStructures(this.meta, 'events'))
    this.imports = this.root.openDB('imports', {})
    this.durability = durability
    // Sequence numbers name delivery records and JetStream message ids, so one must never be given
    // twice, even once the outbox rows that carried it are gone: start past every reserved one.
    let last = (this.meta.get(SEQ_RESERVED_KEY) as number | undefined) ?? 0
    for (const key of this.outbox.getKeys({ reverse: true, limit: 1 })) last = Math.max(last, key as number)
    this.outboxSeq = last
    this.seqReserved = last
    let nodeId = this.meta.get(NODE_ID_KEY) as string | undefined
    if (nodeId === undefined) {
      nodeId = randomUUID()
      this.meta.putSync(NODE_ID_KEY, nodeId)
    }
    this.nodeId = nodeId
  }

  /** The sequence number of the last outbox row appended (0 when none yet). */
  get lastOutboxSeq (): number { return this.outboxSeq }

  /**
   * A fresh sequence number (for delivery records not born from a row too). Reserved in blocks of
   * SEQ_RESERVE_BLOCK: the reservation's write is issued in the same event turn as the row or record
   * that uses the number, so it commits with it, and costs one write per block.
   */
  allocateSeq (): number {
    const seq = ++this.outboxSeq
    if (seq > this.seqReserved) {
      this.seqReserved = seq + SEQ_RESERVE_BLOCK
      this.ignoreFailure(this.meta.put(SEQ_RESERVED_KEY, this.seqReserved))
    }
    return seq
  }

  /**
   * Append an outbox row; issued in the same event turn as the state change that caused it, it is
   * committed in the same transaction. Returns the row's id (its sequence number, as a string).
   * `origin`: the row was first written elsewhere (a row a new owner resends, cluster mode), and its
   * deliveries are sent under the webhook-id made there; kept in outboxOrigins until the row is relayed.
   */
  appendOutbox (row: OutboxRow, origin: RowOrigin | null = null): string {
    const seq = this.allocateSeq()
    const bytes = encodeRow(row)
    // Its failure is the transaction's, reported through the state write it travels with. The row's
    // id is its key: not stored in it too.
    this.ignoreFailure(this.outbox.put(seq, asStored(bytes)))
    if (origin !== null) this.ignoreFailure(this.outboxOrigins.put(seq, [origin.node, origin.seq]))
    if (this.outboxAppended !== null) for (const appended of this.outboxAppended.list) appended(seq, row, bytes, origin)
    return String(seq)
  }

  /** Where the outbox row `seq` was first written, when this node resends it for another; null for its own rows. */
  outboxOrigin (seq: number): RowOrigin | null {
    const value = this.outboxOrigins.get(seq) as [string, number] | undefined
    return value === undefined ? null : { node: value[0], seq: value[1] }
  }

  /** Removes an outbox row (relayed, taken back or erased), and its origin if it has one. Resolves with the row's removal. */
  removeOutbox (seq: number, origin: boolean): Promise<boolean> {
    if (origin) this.ignoreFailure(this.outboxOrigins.remove(seq))
    return this.outbox.remove(seq)
  }

  /**
   * Wait until a write is as durable as configured. Every put issued in the same event turn shares
   * the transaction, so waiting on the last one covers them all.
   */
  durable (write: Promise<boolean>): Promise<void> {
    // lmdb-js answers the unconditional puts of one transaction with one promise: they share one wait
    // (and one observation: a batch of 100 events is one commit, not 100).
    if (write === this.lastDurableWrite) return this.lastDurable!
    const flushed = (write as Promise<boolean> & { flushed?: Promise<void> }).flushed
    let done = this.durability === 'flushed' && flushed !== undefined ? write.then(() => flushed) : write.then(noop)
    const observers = this.durableObserved?.list
    if (observers !== undefined && observers.length > 0) {
      const startMs = performance.now()
      done = done.then(() => {
        const durationMs = performance.now() - startMs
        for (const observe of observers) observe(durationMs)
      })
    }
    this.lastDurableWrite = write
    this.lastDurable = done
    return done
  }

  /**
   * Writes issued in one event turn share one promise (their transaction's): it is given one handler,
   * not one per write, and a failure is reported through `report` (default: through another write).
   */
  ignoreFailure (write: Promise<boolean>, report: (error: unknown) => void = noop): void {
    if (write === this.lastIgnored && report === this.lastReport) return
    this.lastIgnored = write
    this.lastReport = report
    write.catch(report)
  }

  /** Put one record and wait for it per the durability setting. */
  save (db: Database, key: Key, value: unknown): Promise<void> {
    return this.durable(db.put(key, value))
  }

  get isOpen (): boolean { return !this.closed }

  async close (): Promise<void> {
    if (this.closed) return
    this.closed = true
    await this.root.flushed
    await this.root.close()
    this.lock.release()
  }
}

const LMDB_FILES = ['data.mdb', 'lock.mdb']

/**
 * The field names of Beacon's own records (entity state, outbox rows, delivery records and what they
 * nest): an object whose keys are all among them may take one of the db's shared structures. A field
 * missing here only costs speed (its record describes itself in every value).
 */
const RECORD_FIELDS = new Set([
  // EntityState, VisitorState, ProfileState, DeviceSummary, ImpressionHistory
  'attributes', 'segments', 'computed', 'segmentsVersion', 'expiresAtMs', 'indexed', 'profileId', 'firstSeenMs',
  'lastSeenMs', 'counts', 'lastPlatform', 'lastDevice', 'lastPath', 'viewedSkus', 'viewedCategories', 'purchasedSkus',
  'purchases', 'totalSpent', 'orderIds', 'impressions', 'windows', 'attributeTimes', 'visitors', 'devices', 'moves',
  'metrics', 'n', 't', 'profileSeq', 'applied', 'assignments', 'activeMs',
  // Experiments: VisitorState.experiments (keyed by campaign: a plain map) holds Exposure records
  'experiments', 'r', 'v', 'x', 'y',
  // Segment backfills: VisitorState.backfills (keyed by segment: a plain map) holds { id, through } records
  'backfills', 'through',
  // VisitorMetrics
  'pageViews', 'productViews',
  // outbox rows
  'id', 'kind', 'account', 'event', 'segment', 'change', 'visitorId', 'fields', 'occurredAt', 'occurredAtMs',
  // DeliveryRecord, DeliveryItem, DeliveryContext, AttemptRecord
  'webhookId', 'seq', 'status', 'item', 'attempt', 'attempts', 'dueMs', 'createdAtMs', 'updatedAtMs', 'replayedAtMs',
  'node', 'origin', 'context', 'eventFields', 'audience', 'atMs', 'latencyMs', 'error',
])

/** Options of a db whose values share record structures, kept in `meta` under ['structures', name]. */
function sharedStructures (meta: Database, name: string): DatabaseOptions {
  const key = ['structures', name]
  return {
    getStructures: () => meta.get(key) ?? null,
    // msgpackr calls this when a value brought a new shape; false makes it reload and encode again.
    saveStructures: (structures: unknown[], isCompatible: number | ((existing: unknown) => boolean)) => meta.transactionSync(() => {
      const existing = meta.get(key) as unknown[] | undefined
      const compatible = typeof isCompatible === 'function' ? isCompatible(existing) : (existing?.length ?? 0) === isCompatible
      if (!compatible) return false
      meta.putSync(key, structures)
      return true
    }),
    shouldShareStructure: (keys: string[]) => keys.every(field => RECORD_FIELDS.has(field)),
    // Maps keyed by site data are written as plain msgpack maps: as records they described their keys
    // inline in every value, which cost more to write and to read.
    useRecords: isOwnRecord,
    mapsAsObjects: true,
  } as DatabaseOptions
}

/** One of Beacon's own records (its first field is one of Beacon's), not a map keyed by site data. */
function isOwnRecord (value: object): boolean {
  for (const key in value) return RECORD_FIELDS.has(key)
  return false
}

const SEQ_RESERVED_KEY = 'seq-reserved'
export const NODE_ID_KEY = 'node-id'
const SEQ_RESERVE_BLOCK = 100_000

function noop (): void {}
