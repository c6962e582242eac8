// Cluster mode's panel sessions: one replicated KV bucket (`BEACON_SESSIONS_<cluster>`), one entry per
// session under its key (the SHA-256 of the cookie's id, hex: never the id), its value opaque bytes.
// The bucket's max age is at least the sessions' lifetime, so a session's entry outlives it and then
// disappears by itself (JetStream 2.9 tells no watcher of that: each node also checks the expiry the
// value carries). Every node watches the bucket into its memory, so checking a cookie is a map lookup.
// Every value is signed (entry-signer.ts): an entry whose signature does not hold (written by anyone
// but a node with the cluster's BEACON_SECRETS_KEY, or by a release before signatures) is refused,
// logged with its bucket and key, and never delivered (its session does not exist for this node).

import type { NatsConnection } from '@nats-io/transport-node'
import { jetstream, jetstreamManager, type JetStreamClient } from '@nats-io/jetstream'
import { Kvm, type KV } from '@nats-io/kv'
import { deleteKey } from './config-kv.js'
import { invalidArgument, positiveInteger } from './errors.js'
import { isStreamNotFound, retryWhileElecting } from './retry.js'
import type { EntrySigner } from './entry-signer.js'
import { log } from '../log.js'

/** An entry outlives its session by this much in the bucket: the nodes' clocks differ a little. */
export const SESSION_TTL_MARGIN_MS = 60_000

/** How long a starting node waits for the bucket's current entries before it serves anyway (see `watch`). */
export const SESSIONS_READY_WAIT_MS = 5_000

export interface SessionKvOptions {
  nc: NatsConnection
  /** The KV bucket's name, e.g. `BEACON_SESSIONS_<cluster>`. */
  bucket: string
  replicas: number
  /** The bucket's max age: at least a session's lifetime. */
  ttlMs: number
  /** Signs every value written and checks every value read. */
  signer: EntrySigner
}

export interface SessionKvWatch {
  /** Resolves once the entries the bucket held when the watch started were delivered. */
  ready: Promise<void>
  stop (): void
}

/** A session entry as the watch delivers it: its bytes, or null once deleted. */
export type SessionKvChange = (key: string, value: Uint8Array | null, revision: number) => void

export class SessionKv {
  private constructor (private readonly kv: KV, private readonly js: JetStreamClient, private readonly bucket: string, private readonly signer: EntrySigner) {}

  static async open ({ nc, bucket, replicas, ttlMs, signer }: SessionKvOptions): Promise<SessionKv> {
    positiveInteger('replicas', replicas)
    positiveInteger('ttlMs', ttlMs)
    const kv = await retryWhileElecting(() => new Kvm(nc).create(bucket, { history: 1, replicas, ttl: ttlMs }))
    // An existing bucket keeps the max age it was made with: raised when sessions now last longer.
    // Right after the bucket's creation (here or by another node) its stream may not be found yet by
    // the server answering (isStreamNotFound): it exists, ask again.
    const status = await retryWhileElecting(() => kv.status(), 30_000, isStreamNotFound)
    if (status.ttl < ttlMs) {
      const jsm = await jetstreamManager(nc)
      await retryWhileElecting(() => jsm.streams.update(status.streamInfo.config.name, { ...status.streamInfo.config, max_age: ttlMs * 1_000_000 }), 30_000, isStreamNotFound)
    }
    return new SessionKv(kv, jetstream(nc), bucket, signer)
  }

  /** Stores an entry (signed); resolves with its revision once JetStream stored it (on a quorum with R3). */
  put (key: string, value: Uint8Array): Promise<number> {
    return this.kv.put(checked(key), this.signer.sign(this.bucket, key, value))
  }

  /** Deletes an entry (a delete marker every watcher sees); resolves with its revision once stored. */
  delete (key: string): Promise<number> {
    return deleteKey(this.js, this.bucket, checked(key))
  }

  /**
   * Every live entry, then every change, in revision order. Ready once an entry arrives with nothing
   * pending after it, or at once when the bucket held none; entries may lapse between the count and
   * the watch's start, so it is ready after SESSIONS_READY_WAIT_MS at the latest.
   */
  async watch (onChange: SessionKvChange): Promise<SessionKvWatch> {
    const live = (await retryWhileElecting(() => this.kv.status(), 30_000, isStreamNotFound)).values
    const iterator = await retryWhileElecting(() => this.kv.watch({ key: '>' }), 30_000, isStreamNotFound)
    let becomeReady!: () => void
    const ready = new Promise<void>(resolve => { becomeReady = resolve })
    const timer = setTimeout(becomeReady, SESSIONS_READY_WAIT_MS)
    const done = (): void => {
      clearTimeout(timer)
      becomeReady()
    }
    if (live === 0) done()
    void (async () => {
      for await (const entry of iterator) {
        if (entry.operation !== 'PUT') {
          onChange(entry.key, null, entry.revision)
        } else {
          const opened = this.signer.open(this.bucket, entry.key, entry.value)
          if (opened.ok) onChange(entry.key, opened.value, entry.revision)
          else log.warn({ bucket: this.bucket, key: entry.key, revision: entry.revision, why: opened.why }, 'a session entry failed its signature check (not written by a node with this cluster\'s BEACON_SECRETS_KEY): refused')
        }
        if (entry.delta === 0) done()
      }
    })().catch(() => {})
    return {
      ready,
      stop () {
        clearTimeout(timer)
        iterator.stop()
      },
    }
  }
}

function checked (key: string): string {
  if (!/^[0-9a-f]{64}$/.test(key)) throw invalidArgument('key', 'must be a SHA-256 in hex')
  return key
}
