// Assertions of invariants at module boundaries: what must hold when one part hands data to another
// (a key's shape, a count that cannot be negative, a state machine's state). A failed assertion is a
// bug in Beacon, never bad input: bad input is refused with a 4xx before it reaches a boundary. It
// throws an AssertionError carrying its context; a request that meets one is answered 500 `internal`
// and logged with that context (src/http/server.ts), and the process keeps serving.

export class AssertionError extends Error {
  override readonly name = 'AssertionError'
  /** What the failed check saw: ids, sizes, states (never secrets or personal data). */
  readonly context: Readonly<Record<string, unknown>>

  constructor (message: string, context: Readonly<Record<string, unknown>>) {
    super(`assertion failed: ${message}`)
    this.context = context
  }
}

export function assert (condition: unknown, message: string, context: Readonly<Record<string, unknown>> = {}): asserts condition {
  if (!condition) throw new AssertionError(message, context)
}
