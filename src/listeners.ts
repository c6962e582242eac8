// Who is told of something: a list given to the teller at construction and joined by each listener,
// by the wiring (src/app.ts) or, for one that listens only while it runs, by the listener itself
// (given the same list at its construction). It breaks a construction cycle (the listener needs the
// teller built first) without a mutable slot, and src/app.ts shows who tells whom.

export class Listeners<F> {
  private readonly listeners: F[] = []

  /** The current listeners, for the teller to call in turn (no copy: the hot path tells through it). */
  get list (): readonly F[] { return this.listeners }

  add (listener: F): void { this.listeners.push(listener) }

  delete (listener: F): void {
    const at = this.listeners.indexOf(listener)
    if (at >= 0) this.listeners.splice(at, 1)
  }
}
