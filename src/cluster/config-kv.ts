// Configuration records of cluster mode (accounts, tokens, event types, campaigns, segments, webhooks,
// panel users) in one replicated JetStream KV bucket, as opaque bytes under `<kind>.<id>`. Every node watches the
// bucket: it gets each record's current value first, then every change in the order it was written,
// and recompiles what it serves from them. No TTL: configuration never lapses.
//
// Ids are free text in Beacon; a KV key allows only [-/_=.A-Za-z0-9]. So each id is written with every
// character outside [A-Za-z0-9_-] as `=` and two upper-case hex digits per UTF-8 byte ("a.b" → "a=2Eb"):
// readable for common ids, one id per key, reversible.

import { Empty, headers, type NatsConnection } from '@nats-io/transport-node'
import { jetstream, type JetStreamClient } from '@nats-io/jetstream'
import { Kvm, type KV } from '@nats-io/kv'
import { invalidArgument, positiveInteger } from './errors.js'
import { retryWhileElecting } from './retry.js'
import { readyAt } from './applied-revision.js'

export const CONFIG_KINDS = ['accounts', 'tokens', 'eventTypes', 'campaigns', 'segments', 'webhooks', 'users', 'destinations'] as const
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
}

const KINDS = new Set<string>(CONFIG_KINDS)

export class ConfigStore {
  private constructor (private readonly kv: KV, private readonly js: JetStreamClient, private readonly bucket: string) {}

  static async open (options: ConfigStoreOptions): Promise<ConfigStore> {
    positiveInteger('replicas', options.replicas)
    const kv = await retryWhileElecting(() => new Kvm(options.nc).create(options.bucket, { history: 1, replicas: options.replicas }))
    return new ConfigStore(kv, jetstream(options.nc), options.bucket)
  }

  /** Writes a record; resolves with its revision once JetStream stored it (on a quorum with R3). */
  put (kind: ConfigKind, id: string, value: Uint8Array): Promise<number> {
    return this.kv.put(configKey(kind, id), value)
  }

  /** Deletes a record (a delete marker, what KV delete writes); resolves with its revision once stored. */
  delete (kind: ConfigKind, id: string): Promise<number> {
    return deleteKey(this.js, this.bucket, configKey(kind, id))
  }

  /** The bucket's last revision, as its stream leader answers it: every write acknowledged so far is at or below it. */
  async lastRevision (): Promise<number> {
    return (await this.kv.status()).streamInfo.state.last_seq
  }

  /** Current records, then every change. stop() ends the watch. */
  async watch (handlers: ConfigWatchHandlers): Promise<{ stop (): void }> {
    // The watch delivers the records in revision order: it has caught up once it reached the
    // stream's last revision at the time it started.
    const delivered = readyAt(await this.lastRevision(), handlers.onReady)
    const iterator = await this.kv.watch({ key: '>' })
    void (async () => {
      for await (const entry of iterator) {
        const change = parseKey(entry.key)
        if (change !== null) {
          handlers.onChange({ ...change, value: entry.operation === 'PUT' ? entry.value : null, revision: entry.revision })
        }
        delivered(entry.revision)
      }
    })().catch(() => {})
    return iterator
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
