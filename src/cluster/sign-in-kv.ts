// Cluster mode's sign-in windows (src/users/shared-sign-in-limit.ts): one replicated KV bucket,
// `BEACON_SIGNIN_<cluster>`, an entry per hashed email or address holding its window as JSON. Writes
// are compare-and-set on the key's revision (a put expecting the key's last subject sequence: exact for
// a create on every server version, for an update from nats-server 2.9.21; on 2.9.10 with replicas two
// nodes counting one key at the same moment may count one failure). The bucket's max age is the window:
// an entry lapses by itself once it can block nothing more.

import type { NatsConnection } from '@nats-io/transport-node'
import { Kvm, type KV } from '@nats-io/kv'
import { isCompareAndSetRefusal, positiveInteger } from './errors.js'
import { retryWhileElecting } from './retry.js'

export interface SignInWindow { startMs: number, failures: number, pending?: number }

export interface SignInKvOptions {
  nc: NatsConnection
  bucket: string
  replicas: number
  /** The bucket's max age: the sign-in window. */
  ttlMs: number
}

export class SignInKv {
  private constructor (private readonly kv: KV) {}

  static async open ({ nc, bucket, replicas, ttlMs }: SignInKvOptions): Promise<SignInKv> {
    positiveInteger('replicas', replicas)
    positiveInteger('ttlMs', ttlMs)
    return new SignInKv(await retryWhileElecting(() => new Kvm(nc).create(bucket, { history: 1, replicas, ttl: ttlMs })))
  }

  async read (key: string): Promise<{ window: SignInWindow | null, revision: number }> {
    const entry = await this.kv.get(key)
    if (entry === null) return { window: null, revision: 0 }
    return { window: entry.operation === 'PUT' ? entry.json<SignInWindow>() : null, revision: entry.revision }
  }

  async write (key: string, window: SignInWindow, revision: number): Promise<boolean> {
    try {
      await this.kv.put(key, JSON.stringify(window), { previousSeq: revision })
      return true
    } catch (error) {
      if (isCompareAndSetRefusal(error)) return false
      throw error
    }
  }
}
