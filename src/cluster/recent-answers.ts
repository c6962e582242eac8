// The answers an owner gave to requests sent over NATS (forwarded HTTP requests, actor messages), kept
// by request id for a while: a sender that timed out and sent again reaches the same owner and gets the
// first answer (or waits for the one being computed, however long it runs) instead of a second
// execution. An answer is kept keepMs after it was computed; bounded by count too, oldest first. An
// answer "moved" (null: the partition went while it ran) is forgotten, so a retry runs at whichever
// node owns the partition then.

interface Entry {
  reply: Promise<Uint8Array | null>
  /** When the answer was computed; Infinity while it is being computed. */
  doneMs: number
}

export class RecentAnswers {
  private readonly entries = new Map<string, Entry>()

  constructor (private readonly keepMs: number, private readonly max: number, private readonly now: () => number) {}

  /** The answer, or the one being computed, of a request with this id, if kept; else undefined. */
  get (id: string, nowMs: number): Promise<Uint8Array | null> | undefined {
    const known = this.entries.get(id)
    return known !== undefined && this.fresh(known, nowMs) ? known.reply : undefined
  }

  keep (id: string, reply: Promise<Uint8Array | null>, nowMs: number): void {
    for (const [key, entry] of this.entries) {
      if (this.entries.size < this.max && this.fresh(entry, nowMs)) break
      this.entries.delete(key)
    }
    const entry: Entry = { reply, doneMs: Infinity }
    this.entries.set(id, entry)
    reply.then(bytes => {
      if (bytes === null && this.entries.get(id) === entry) this.entries.delete(id)
      else entry.doneMs = this.now()
    }, () => { entry.doneMs = this.now() })
  }

  private fresh (entry: Entry, nowMs: number): boolean {
    return entry.doneMs === Infinity || nowMs - entry.doneMs <= this.keepMs
  }
}
