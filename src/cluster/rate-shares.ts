// This node's shares of the rate limits a cluster enforces together (cluster mode). Each node counts the
// requests it handles against its share of each limit, so the nodes together keep to about the
// configured rate rather than N times it:
// - keys: the partitions it owns over the partition count. An account's or a token's requests are
//   counted where they run, at their key's owner, and keys spread over the partitions evenly, so an
//   account's traffic over many visitors is held to about its rate in the whole cluster (one visitor's
//   traffic, all at one owner, to that owner's share);
// - deliveries: one over the live nodes, which all pull every webhook's deliveries from the stream.
// Worked out each time the node gains a partition and every second (for losses and membership), never
// per request.

export interface ShareSource {
  ownedCount (): number
  liveNodes (): string[]
}

export const RATE_SHARES_INTERVAL_MS = 1000

export class RateShares {
  keys = 1
  deliveries = 1
  private timer: NodeJS.Timeout | null = null

  constructor (private readonly source: ShareSource, private readonly partitions: number) {}

  start (): void {
    this.update()
    this.timer = setInterval(() => { this.update() }, RATE_SHARES_INTERVAL_MS)
    this.timer.unref()
  }

  update (): void {
    // A node owning nothing yet runs no key's request; one partition's share keeps its limiters finite.
    this.keys = Math.max(1, this.source.ownedCount()) / this.partitions
    this.deliveries = 1 / Math.max(1, this.source.liveNodes().length)
  }

  stop (): void {
    if (this.timer !== null) clearInterval(this.timer)
  }
}
