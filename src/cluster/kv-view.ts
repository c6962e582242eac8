// A local view of the keys of a KV bucket whose entries expire (the bucket's max age): the last value
// seen for each key and when this node saw it. JetStream 2.9 removes an expired entry without telling
// watchers, so a key counts as lapsed here once it was not rewritten for longer than the bucket's TTL,
// measured on this node's clock from the moment its last write arrived (never earlier than the server's
// own expiry, which counts from the write).
//
// The watch is an ordered push consumer on one server; when that server dies it may stay silent for
// long. Keys here are rewritten all the time (heartbeats, renewals), so a view that heard nothing for a
// TTL restarts its watch (restartIfQuiet, called from the balancer's rounds).

import type { KV, KvWatchEntry } from '@nats-io/kv'
import type { Clock } from '../clock.js'
import { isStreamNotFound, retryWhileElecting } from './retry.js'

export interface ViewEntry {
  /** The value as written (UTF-8); null after a delete or purge. */
  value: string | null
  revision: number
  seenAtMs: number
  /**
   * The key's last put as seen (value and arrival), kept across a later delete or touch: who wrote the
   * key last. Null while no put of it was seen.
   */
  lastPut: { value: string, seenAtMs: number } | null
  /** When a delete following lastPut was seen; null while the key was not deleted since. */
  deletedAtMs: number | null
}

export class KvView {
  private readonly entries = new Map<string, ViewEntry>()
  private watcher: { stop (): void } | null = null
  private filter = '>'
  private lastEventAtMs = 0

  constructor (
    private readonly kv: KV,
    private readonly ttlMs: number,
    private readonly clock: Clock,
    /** Called after each change is recorded (a put, a delete), with its key and the entry it replaced. */
    private readonly onChange: (key: string, entry: ViewEntry, before: ViewEntry | undefined) => void = () => {}
  ) {}

  /** Starts watching `filter` (e.g. "p.>"); resolves once the watch is set up. */
  async start (filter: string): Promise<void> {
    this.filter = filter
    // nats-server 2.10 may answer 'stream not found' for an existing bucket while its stream's assignment
    // is not applied on the server asked (a node restarted during a takeover): it exists, ask again.
    const iterator = await retryWhileElecting(() => this.kv.watch({ key: filter }), 30_000, isStreamNotFound)
    this.watcher = iterator
    this.lastEventAtMs = this.clock.nowMs()
    void (async () => {
      for await (const entry of iterator) this.record(entry)
    })().catch(() => {}).finally(() => {
      if (this.watcher === iterator) this.watcher = null
    })
  }

  /** Starts the watch again if it ended or delivered nothing for `quietMs`. */
  async restartIfQuiet (quietMs: number): Promise<void> {
    if (this.watcher !== null && this.clock.nowMs() - this.lastEventAtMs < quietMs) return
    this.stop()
    await this.start(this.filter)
  }

  stop (): void {
    this.watcher?.stop()
    this.watcher = null
  }

  /** The key's last value if it is live (written within the TTL and not deleted), else null. */
  live (key: string): ViewEntry | null {
    const entry = this.entries.get(key)
    if (entry === undefined || entry.value === null) return null
    return this.clock.nowMs() - entry.seenAtMs < this.ttlMs ? entry : null
  }

  /** The key's last entry as seen, live, lapsed or deleted; undefined if never seen. */
  last (key: string): ViewEntry | undefined {
    return this.entries.get(key)
  }

  /** Every live key with its entry. */
  liveEntries (): Array<[string, ViewEntry]> {
    const now = this.clock.nowMs()
    const out: Array<[string, ViewEntry]> = []
    for (const [key, entry] of this.entries) {
      if (entry.value !== null && now - entry.seenAtMs < this.ttlMs) out.push([key, entry])
    }
    return out
  }

  /**
   * Counts the key as live (holder unknown when it was not live) from now, until a watch event or the
   * TTL says otherwise. Its last put and delete stay as seen.
   */
  touch (key: string): void {
    const entry = this.entries.get(key)
    const nowMs = this.clock.nowMs()
    this.entries.set(key, {
      value: entry?.value ?? '', revision: entry?.revision ?? 0, seenAtMs: nowMs,
      lastPut: entry?.lastPut ?? null, deletedAtMs: entry?.deletedAtMs ?? null,
    })
  }

  private record (entry: KvWatchEntry): void {
    const value = entry.operation === 'PUT' ? Buffer.from(entry.value).toString('utf8') : null
    const seenAtMs = this.clock.nowMs()
    const before = this.entries.get(entry.key)
    const lastPut = value !== null ? { value, seenAtMs } : before?.lastPut ?? null
    const deletedAtMs = value !== null ? null : before?.deletedAtMs ?? seenAtMs
    const seen: ViewEntry = { value, revision: entry.revision, seenAtMs, lastPut, deletedAtMs }
    this.lastEventAtMs = seenAtMs
    this.entries.set(entry.key, seen)
    this.onChange(entry.key, seen, before)
  }
}
