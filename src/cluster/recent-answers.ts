// The answers an owner gave to requests sent over NATS (forwarded HTTP requests, actor messages), kept by
// request id for a while: a sender that timed out and sent again reaches the same owner and gets the first
// answer (or waits for the one being computed) instead of a second execution. Bounded by age and count,
// oldest first. An answer "moved" (null: the partition went while it ran) is forgotten, so a retry runs
// at whichever node owns the partition then.

export class RecentAnswers {
  private readonly entries = new Map<string, { reply: Promise<Uint8Array | null>, atMs: number }>()

  constructor (private readonly keepMs: number, private readonly max: number) {}

  /** The answer, or the one being computed, of a request with this id seen within keepMs; else undefined. */
  get (id: string, nowMs: number): Promise<Uint8Array | null> | undefined {
    const known = this.entries.get(id)
    return known !== undefined && nowMs - known.atMs <= this.keepMs ? known.reply : undefined
  }

  keep (id: string, reply: Promise<Uint8Array | null>, nowMs: number): void {
    for (const [key, entry] of this.entries) {
      if (this.entries.size < this.max && nowMs - entry.atMs <= this.keepMs) break
      this.entries.delete(key)
    }
    const entry = { reply, atMs: nowMs }
    this.entries.set(id, entry)
    reply.then(bytes => { if (bytes === null && this.entries.get(id) === entry) this.entries.delete(id) }, () => {})
  }
}
