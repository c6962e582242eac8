// Claims of schedule runs (cluster mode): a run of a schedule webhook, or its part for one partition,
// is made by the one node that created its key in a replicated KV bucket, `BEACON_SCHEDULES_<cluster>`.
// A put expecting an empty key (previous sequence 0) is checked exactly by JetStream on every server version (expected last
// subject sequence 0, as lease acquisition: docs/internals/cluster.md), so two nodes never both get a claim; the
// key holds the claiming node's id, so that node asking again (its run failed part-way) gets it again.
// Keys lapse after CLAIM_TTL_MS (the bucket's max age): a run older than that is not run again.

import type { NatsConnection } from '@nats-io/transport-node'
import { Kvm, type KV } from '@nats-io/kv'
import { isCompareAndSetRefusal, positiveInteger } from './errors.js'
import { retryWhileElecting } from './retry.js'

/** How long a claim is kept: a node never runs a schedule's run older than half of it (schedules.ts). */
export const CLAIM_TTL_MS = 24 * 3600_000

export function scheduleBucketName (cluster: string): string {
  return `BEACON_SCHEDULES_${cluster}`
}

export interface ScheduleClaimsOptions {
  nc: NatsConnection
  cluster: string
  replicas: number
  ttlMs?: number
}

export class ScheduleClaims {
  private constructor (private readonly kv: KV, readonly ttlMs: number) {}

  static async open (options: ScheduleClaimsOptions): Promise<ScheduleClaims> {
    positiveInteger('replicas', options.replicas)
    const ttlMs = options.ttlMs ?? CLAIM_TTL_MS
    const kv = await retryWhileElecting(() => new Kvm(options.nc).create(scheduleBucketName(options.cluster), {
      history: 1, replicas: options.replicas, ttl: ttlMs,
    }))
    return new ScheduleClaims(kv, ttlMs)
  }

  /**
   * Resolves true for the one node whose create made the key of (account, webhook, run, part), false
   * for every other (the key exists). `part`: a partition, or 'all' for a run made once as a whole.
   * The node that holds a claim gets true again when it asks again: a run that failed part-way (or a
   * create whose answer was lost) is made again by it, never by nobody. Fails (rejects) when NATS
   * cannot answer: the caller makes nothing then, and asks again on its next check.
   */
  async claim (account: string, webhookId: string, runMs: number, part: number | 'all', node: string): Promise<boolean> {
    const key = claimKey(account, webhookId, runMs, part)
    try {
      await this.kv.put(key, new TextEncoder().encode(node), { previousSeq: 0 })
      return true
    } catch (error) {
      if (!isCompareAndSetRefusal(error)) throw error
      return (await this.kv.get(key))?.string() === node
    }
  }
}

export function claimKey (account: string, webhookId: string, runMs: number, part: number | 'all'): string {
  return `${encodePart(account)}.${encodePart(webhookId)}.${runMs}.${part}`
}

/** [A-Za-z0-9_-] as they are, every other UTF-8 byte as `=XX` (config-kv.ts's key encoding). */
function encodePart (text: string): string {
  let out = ''
  for (const byte of Buffer.from(text, 'utf8')) {
    const plain = (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a) || byte === 0x2d || byte === 0x5f
    out += plain ? String.fromCharCode(byte) : `=${byte.toString(16).toUpperCase().padStart(2, '0')}`
  }
  return out
}
