// Configuration records of cluster mode (accounts, tokens, event types, campaigns, segments, webhooks,
// panel users) in one replicated JetStream KV bucket, as opaque bytes under `<kind>.<id>`. Every node watches the
// bucket: it gets each record's current value first, then every change in the order it was written,
// and recompiles what it serves from them. No TTL: configuration never lapses.
//
// Ids are free text in Beacon; a KV key allows only [-/_=.A-Za-z0-9]. So each id is written with every
// character outside [A-Za-z0-9_-] as `=` and two upper-case hex digits per UTF-8 byte ("a.b" → "a=2Eb"):
// readable for common ids, one id per key, reversible.
//
// Every value is signed (entry-signer.ts): a record whose signature does not hold (written into the
// bucket by anyone but a node with the cluster's BEACON_SECRETS_KEY) is refused, logged with its bucket
// and key, and never delivered. Records written by a release before signatures are unsigned: refused
// too, except while the records present at start are delivered to a node started with
// BEACON_CLUSTER_RESIGN=true (the upgrade, docs/cluster-security.md), which accepts them and writes them
// back signed (a compare-and-set on their revision: a record changed meanwhile is left as it is); such
// a node re-signs the records signed by an older listed key (a rotation) the same way.

import { Empty, headers, type NatsConnection } from '@nats-io/transport-node'
import { jetstream, type JetStreamClient } from '@nats-io/jetstream'
import { Kvm, type KV } from '@nats-io/kv'
import { invalidArgument, positiveInteger } from './errors.js'
import { isStreamNotFound, retryWhileElecting } from './retry.js'
import { readyAt } from './applied-revision.js'
import type { EntrySigner } from './entry-signer.js'
import { log } from '../log.js'

export const CONFIG_KINDS = ['accounts', 'tokens', 'eventTypes', 'campaigns', 'segments', 'webhooks', 'users', 'destinations', 'savedReports', 'reportRuns', 'backfills'] as const
export type ConfigKind = typeof CONFIG_KINDS[number]

export interface ConfigChange {
  kind: ConfigKind
  id: string
  /** The record's bytes; null when it was deleted. */
  value: Uint8Array | null
  /** The bucket's revision of this change: increasing, in the order of the writes. */
  revision: number
}

export interface ConfigWatchHandlers {
  /** Each record's current value, then each change, one at a time, in order. */
  onChange: (change: ConfigChange) => void
  /** Once every record that existed when the watch started was delivered (at once when there were none). */
  onReady?: () => void
}

export interface ConfigStoreOptions {
  nc: NatsConnection
  /** The KV bucket's name, e.g. `BEACON_CONFIG_<cluster>`. */
  bucket: string
  replicas: number
  /** Signs every value written and checks every value read. */
  signer: EntrySigner
  /** BEACON_CLUSTER_RESIGN: accept and re-sign unsigned records among those present at start. */
  resign?: boolean
}

const KINDS = new Set<string>(CONFIG_KINDS)

export class ConfigStore {
  /** Records this node is writing back re-signed (BEACON_CLUSTER_RESIGN), by key: their value, unchanged. */
  private readonly writtenBack = new Map<string, Uint8Array>()

  private constructor (
    private readonly kv: KV,
    private readonly js: JetStreamClient,
    private readonly bucket: string,
    private readonly signer: EntrySigner,
    private readonly resign: boolean
  ) {}

  static async open (options: ConfigStoreOptions): Promise<ConfigStore> {
    positiveInteger('replicas', options.replicas)
    const kv = await retryWhileElecting(() => new Kvm(options.nc).create(options.bucket, { history: 1, replicas: options.replicas }))
    return new ConfigStore(kv, jetstream(options.nc), options.bucket, options.signer, options.resign ?? false)
  }

  /** Writes a record (signed); resolves with its revision once JetStream stored it (on a quorum with R3). */
  put (kind: ConfigKind, id: string, value: Uint8Array): Promise<number> {
    const key = configKey(kind, id)
    return this.kv.put(key, this.signer.sign(this.bucket, key, value))
  }

  /** Deletes a record (a delete marker, what KV delete writes); resolves with its revision once stored. */
  delete (kind: ConfigKind, id: string): Promise<number> {
    return deleteKey(this.js, this.bucket, configKey(kind, id))
  }

  /** The bucket's last revision, as its stream leader answers it: every write acknowledged so far is at or below it. */
  async lastRevision (): Promise<number> {
    return (await retryWhileElecting(() => this.kv.status(), 30_000, isStreamNotFound)).streamInfo.state.last_seq
  }

  /** Current records, then every change. stop() ends the watch. */
  async watch (handlers: ConfigWatchHandlers): Promise<{ stop (): void }> {
    // The watch delivers the records in revision order: it has caught up once it reached the
    // stream's last revision at the time it started.
    const startedAt = await this.lastRevision()
    const delivered = readyAt(startedAt, handlers.onReady)
    const iterator = await retryWhileElecting(() => this.kv.watch({ key: '>' }), 30_000, isStreamNotFound)
    void (async () => {
      for await (const entry of iterator) {
        const change = parseKey(entry.key)
        if (change !== null) {
          const value = entry.operation === 'PUT' ? this.checked(entry.key, entry.value, entry.revision, entry.revision <= startedAt) : null
          // A record this node re-signed comes back with its value unchanged: not a change to apply again.
          const resigned = value !== null && entry.revision > startedAt && this.wroteBack(entry.key, value)
          if ((entry.operation !== 'PUT' || value !== null) && !resigned) handlers.onChange({ ...change, value, revision: entry.revision })
        }
        delivered(entry.revision)
      }
    })().catch(() => {})
    return iterator
  }

  /** The record's value if its signature holds (or, in the upgrade window, it is unsigned); null: refused, logged. */
  private checked (key: string, stored: Uint8Array, revision: number, atStart: boolean): Uint8Array | null {
    const opened = this.signer.open(this.bucket, key, stored)
    if (opened.ok) {
      if (!opened.current && this.resign && atStart) this.writeBack(key, opened.value, revision)
      return opened.value
    }
    if (opened.why === 'unsigned' && this.resign && atStart) {
      log.warn({ bucket: this.bucket, key, revision }, 'an unsigned configuration record was accepted (BEACON_CLUSTER_RESIGN) and is written back signed')
      this.writeBack(key, stored, revision)
      return stored
    }
    log.warn({ bucket: this.bucket, key, revision, why: opened.why }, 'a configuration record failed its signature check (not written by a node with this cluster\'s BEACON_SECRETS_KEY): refused')
    return null
  }

  private writeBack (key: string, value: Uint8Array, revision: number): void {
    this.writtenBack.set(key, value)
    this.kv.update(key, this.signer.sign(this.bucket, key, value), revision).catch((error: unknown) => {
      this.writtenBack.delete(key)
      log.warn({ err: error, bucket: this.bucket, key }, 'a configuration record was not re-signed (changed meanwhile, or NATS failed)')
    })
  }

  /** Whether this record is the re-signed copy of one this node wrote back (then forgotten: seen once). */
  private wroteBack (key: string, value: Uint8Array): boolean {
    const original = this.writtenBack.get(key)
    if (original === undefined || !Buffer.from(original).equals(Buffer.from(value))) return false
    this.writtenBack.delete(key)
    return true
  }
}

/**
 * Writes a KV delete marker for `key`; resolves with its revision once stored. Published by hand rather
 * than through kv.delete, which does not answer the marker's revision.
 */
export async function deleteKey (js: JetStreamClient, bucket: string, key: string): Promise<number> {
  const h = headers()
  h.set('KV-Operation', 'DEL')
  return (await js.publish(`$KV.${bucket}.${key}`, Empty, { headers: h })).seq
}

export function configKey (kind: ConfigKind, id: string): string {
  if (!KINDS.has(kind)) throw invalidArgument('kind', `must be one of ${CONFIG_KINDS.join(', ')} (got ${String(kind)})`)
  if (id === '') throw invalidArgument('id', 'must not be empty')
  let out = ''
  for (const byte of Buffer.from(id, 'utf8')) {
    const plain = (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a) || byte === 0x2d || byte === 0x5f
    out += plain ? String.fromCharCode(byte) : `=${byte.toString(16).toUpperCase().padStart(2, '0')}`
  }
  return `${kind}.${out}`
}

function parseKey (key: string): { kind: ConfigKind, id: string } | null {
  const dot = key.indexOf('.')
  if (dot < 0) return null
  const kind = key.slice(0, dot)
  if (!KINDS.has(kind)) return null
  const encoded = key.slice(dot + 1)
  const bytes: number[] = []
  for (let i = 0; i < encoded.length; i++) {
    if (encoded[i] === '=') {
      bytes.push(parseInt(encoded.slice(i + 1, i + 3), 16))
      i += 2
    } else {
      bytes.push(encoded.charCodeAt(i))
    }
  }
  return { kind: kind as ConfigKind, id: Buffer.from(bytes).toString('utf8') }
}
