// Outbox rows the relay must not take yet. Cluster mode holds the rows of each entity write until the
// write's changelog append is acknowledged (actors/entity-log.ts): the webhooks of a write never go out
// before the write is durable, and the rows of a write that is refused or not confirmed are taken back
// from the outbox before they are let go, so they never go out at all. The relay takes rows in seq
// order and stops at the first held one (relay.ts); letting rows go wakes it.

export class RelayGate {
  private readonly held = new Set<number>()
  private opened: () => void = noop

  /** Who is woken when rows are let go (the relay). */
  onOpen (wake: () => void): void {
    this.opened = wake
  }

  hold (seq: number): void {
    this.held.add(seq)
  }

  /**
   * The rows' write ended: acknowledged, or its rows removed from the outbox (that removal committed).
   * Each row is given as a tuple whose first element is its seq (the changelog's outbox parts, as they are).
   */
  letGo (rows: ReadonlyArray<readonly [number, ...unknown[]]>): void {
    for (const [seq] of rows) this.held.delete(seq)
    this.opened()
  }

  holds (seq: number): boolean {
    return this.held.size !== 0 && this.held.has(seq)
  }
}

function noop (): void {}
