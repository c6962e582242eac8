// The LMDB environment: one per node, named databases per kind of record, msgpackr values.
//
// Writes go through lmdb-js's asynchronous batching: every put issued in the same event turn lands in
// the same transaction (`eventTurnBatching`, on by default), so an actor's state row and the rows that
// must travel with it (outbox, later) are atomic. A put's promise resolves at commit; with
// `separateFlushed` it also carries `.flushed`, resolved once the OS reports the sync. Which of the two
// a write waits for before it is acknowledged is BEACON_DURABILITY.

import { randomUUID } from 'node:crypto'
import { mkdirSync } from 'node:fs'
import { open, type Database, type RootDatabase } from 'lmdb'
import type { Durability } from '../config.js'

export type Key = string | (string | number)[]

export interface StoreOptions {
  path: string
  durability: Durability
  mapSizeBytes?: number
}

export class Store {
  readonly root: RootDatabase
  readonly accounts: Database
  readonly tokens: Database
  /** Per-account configuration: key [account, kind, name] (event types; campaigns, segments, webhooks later). */
  readonly config: Database
  readonly visitors: Database
  readonly profiles: Database
  /** Rows that must reach the outside (audience changes, webhook deliveries): key = sequence number. */
  readonly outbox: Database
  /** When an entity's segment windows next expire: key [dueMs, account, kind, id], value null. */
  readonly expiries: Database
  /** Who is in which segment: key [account, segment, 'visitor' | 'profile', id], value null. */
  readonly members: Database
  /** Webhook deliveries and their attempts: key [account, webhookId, outbox seq]. */
  readonly deliveries: Database
  /** The store's own bookkeeping: the sequence numbers reserved so far, the node id. */
  readonly meta: Database
  /**
   * This data folder's id, made on its first start: sequence numbers are unique within one folder
   * only, so what several nodes share (JetStream message ids) carries it too.
   */
  readonly nodeId: string
  /** Told after every outbox append (the relay wakes up). */
  onOutboxAppend: (() => void) | null = null
  /** Told how long each awaited write took to become durable (metrics); null costs nothing. */
  onDurableMs: ((durationMs: number) => void) | null = null
  readonly durability: Durability
  private outboxSeq: number
  private seqReserved: number
  private closed = false

  constructor ({ path, durability, mapSizeBytes }: StoreOptions) {
    mkdirSync(path, { recursive: true })
    this.root = open({
      path,
      // Always a folder: lmdb-js would take a path with an extension (`/srv/beacon.data`) for a file.
      noSubdir: false,
      separateFlushed: true,
      maxDbs: 16,
      ...(mapSizeBytes ? { mapSize: mapSizeBytes } : {}),
    })
    this.accounts = this.root.openDB('accounts', {})
    this.tokens = this.root.openDB('tokens', {})
    this.config = this.root.openDB('config', {})
    this.visitors = this.root.openDB('visitors', {})
    this.profiles = this.root.openDB('profiles', {})
    this.outbox = this.root.openDB('outbox', {})
    this.expiries = this.root.openDB('expiries', {})
    this.deliveries = this.root.openDB('deliveries', {})
    this.members = this.root.openDB('members', {})
    this.meta = this.root.openDB('meta', {})
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
      this.meta.put(SEQ_RESERVED_KEY, this.seqReserved).catch(noop)
    }
    return seq
  }

  /**
   * Append an outbox row; issued in the same event turn as the state change that caused it, it is
   * committed in the same transaction. Returns the row's id (its sequence number, as a string).
   */
  appendOutbox (row: Record<string, unknown>): string {
    const seq = this.allocateSeq()
    // Its failure is the transaction's, reported through the state write it travels with.
    this.outbox.put(seq, { id: String(seq), ...row }).catch(noop)
    this.onOutboxAppend?.()
    return String(seq)
  }

  /**
   * Wait until a write is as durable as configured. Every put issued in the same event turn shares
   * the transaction, so waiting on the last one covers them all.
   */
  durable (write: Promise<boolean>): Promise<void> {
    const flushed = (write as Promise<boolean> & { flushed?: Promise<void> }).flushed
    const done = this.durability === 'flushed' && flushed !== undefined ? write.then(() => flushed) : write.then(noop)
    const observe = this.onDurableMs
    if (observe === null) return done
    const startMs = performance.now()
    return done.then(() => observe(performance.now() - startMs))
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
  }
}

const SEQ_RESERVED_KEY = 'seq-reserved'
const NODE_ID_KEY = 'node-id'
const SEQ_RESERVE_BLOCK = 100_000

function noop (): void {}
