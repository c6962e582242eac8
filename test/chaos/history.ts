// The history of a chaos run (test/chaos/run.ts), as Jepsen keeps one: every operation a client invoked
// and how it completed, what the webhook sink received, what the nemesis did, the final reads and the
// cluster's health after the faults. One JSON object a line (NDJSON), in the order things happened;
// `time` is milliseconds since the run began, on the runner's one monotonic clock, so "acknowledged
// before this read was invoked" is a comparison of two numbers.
//
// What the operations act on, by key:
// - a register (one value at a time, every value written once): `v:<visitorId>` a visitor's attribute
//   `v`, `p:<profileId>` a profile's attribute `p`, `link:<visitorId>` the profile a visitor is linked to
//   (written by identify calls, each to a profile that visitor was never linked to before);
// - a set: `orders:<visitorId>`, the order ids of a visitor's purchases; its final and read values carry
//   the purchase count too, which must equal the number of order ids (each counted exactly once).

import { createWriteStream, mkdirSync, readFileSync, type WriteStream } from 'node:fs'
import { dirname } from 'node:path'

export type Value = string | number

/** What a read saw: each register's value (null: none), each set's members and count. */
export interface Observed {
  registers: Record<string, Value | null>
  sets: Record<string, { members: string[], count: number }>
}

/**
 * An operation invoked: `write` sets a register to `value`, `add` puts `value` into a set (a purchase;
 * its retries are operations of their own with the same value and idempotency key), `read` reads the
 * registers and sets of one visitor or profile (`key` names it: `visitor:<id>`, `profile:<id>`).
 */
export interface Invoke {
  type: 'invoke'
  op: number
  time: number
  f: 'write' | 'add' | 'read'
  key: string
  value?: Value
  /** The node the request was sent to. */
  node: string
  /** A purchase's Idempotency-Key (the same on its retries) and attempt number, from 1. */
  idempotencyKey?: string
  attempt?: number
}

/**
 * How an operation ended: `ok` (acknowledged: 200), `fail` (a definite refusal: nothing was applied),
 * `info` (unknown: it may or may not have been applied: a timeout, a connection cut, a 503 that does
 * not say nothing was applied). An operation without a completion is unknown.
 */
export interface Complete {
  type: 'ok' | 'fail' | 'info'
  op: number
  time: number
  status?: number
  code?: string
  error?: string
  read?: Observed
}

/** One request the webhook sink received, mapped to the operation's key and value it reports. */
export interface Delivery {
  type: 'webhook'
  time: number
  webhookId: string
  key: string
  value: Value
}

export interface Nemesis {
  type: 'nemesis'
  time: number
  action: string
  target: string
  detail?: string
}

/** A key read back through one node once the faults stopped and the cluster settled. */
export interface Final {
  type: 'final'
  time: number
  node: string
  key: string
  read?: Observed
  /** Why it could not be read (the status and code of the last try). */
  error?: string
}

/** Check 5: after the nemesis stopped, one node's state (ok: answered within 10 s, every partition owned). */
export interface Health {
  type: 'health'
  time: number
  node: string
  ok: boolean
  detail: string
}

export type Entry = Invoke | Complete | Delivery | Nemesis | Final | Health

/** The history being recorded: kept in memory for the checker and appended to an NDJSON file. */
export class History {
  readonly entries: Entry[] = []
  private readonly file: WriteStream
  private readonly startedMs = performance.now()
  private nextOp = 0

  constructor (readonly path: string) {
    mkdirSync(dirname(path), { recursive: true })
    this.file = createWriteStream(path)
  }

  /** Milliseconds since the run began. */
  now (): number {
    return Math.round((performance.now() - this.startedMs) * 1000) / 1000
  }

  /** Records an invocation and answers its operation number. */
  invoke (entry: Omit<Invoke, 'type' | 'op' | 'time'>): number {
    const op = ++this.nextOp
    this.add({ type: 'invoke', op, time: this.now(), ...entry })
    return op
  }

  add (entry: Entry): void {
    this.entries.push(entry)
    this.file.write(JSON.stringify(entry) + '\n')
  }

  async close (): Promise<void> {
    await new Promise<void>(resolve => this.file.end(resolve))
  }
}

/** A history file read back (`npm run chaos -- --check <file>`). */
export function readHistory (path: string): Entry[] {
  return readFileSync(path, 'utf8').split('\n').filter(line => line !== '').map(line => JSON.parse(line) as Entry)
}
