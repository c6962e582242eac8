// The worker's queue: pending groups ordered by due time, then arrival. Items wait here for their
// delay (occurredAtMs + delayMs), a rate token, a free in-flight slot, or an in-memory retry.
//
// Groups mostly arrive in due order (fresh items in occurredAt order, one delay for the webhook), so
// those go to a plain first-in first-out run, and only a group due before the run's last one goes to
// a binary min-heap. The head is the earlier of the two heads. A heap alone cost a pop of a dozen
// scattered reads a delivery at a worker's 10,000 items (about 2 % of the main thread at batchSize 1).

import type { AttemptRecord, DeliveryItem } from '../webhooks/types.js'
import { Fifo } from './fifo.js'

export interface Pending {
  items: DeliveryItem[]
  /** Number of the attempt this group will make next (1 = first). */
  attempt: number
  history: AttemptRecord[]
  dueMs: number
  seq: number
  /** A retry group: sent as is, never merged with other items (its webhook-id must not change). */
  fixed: boolean
}

export class DueHeap {
  /** Groups pushed in due order. */
  private readonly run = new Fifo<Pending>()
  /** The others: a binary min-heap. */
  private readonly nodes: Pending[] = []

  get size (): number {
    return this.run.size + this.nodes.length
  }

  peek (): Pending | undefined {
    const first = this.run.peek()
    const top = this.nodes[0]
    if (first === undefined || (top !== undefined && before(top, first))) return top
    return first
  }

  push (node: Pending): void {
    const last = this.run.last()
    if (last === undefined || !before(node, last)) this.run.push(node)
    else this.heapPush(node)
  }

  pop (): Pending | undefined {
    const head = this.peek()
    if (head === undefined) return undefined
    return head === this.run.peek() ? this.run.shift() : this.heapPop()
  }

  /** Remove and return everything, in due order. */
  drain (): Pending[] {
    const out: Pending[] = []
    for (let node = this.pop(); node !== undefined; node = this.pop()) out.push(node)
    return out
  }

  private heapPush (node: Pending): void {
    const nodes = this.nodes
    nodes.push(node)
    let i = nodes.length - 1
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (!before(node, nodes[parent] as Pending)) break
      nodes[i] = nodes[parent] as Pending
      i = parent
    }
    nodes[i] = node
  }

  private heapPop (): Pending | undefined {
    const nodes = this.nodes
    const top = nodes[0]
    const last = nodes.pop()
    if (top === undefined || last === undefined || nodes.length === 0) return top
    let i = 0
    for (;;) {
      const left = 2 * i + 1
      if (left >= nodes.length) break
      const right = left + 1
      const child = right < nodes.length && before(nodes[right] as Pending, nodes[left] as Pending) ? right : left
      if (!before(nodes[child] as Pending, last)) break
      nodes[i] = nodes[child] as Pending
      i = child
    }
    nodes[i] = last
    return top
  }
}

function before (a: Pending, b: Pending): boolean {
  return a.dueMs < b.dueMs || (a.dueMs === b.dueMs && a.seq < b.seq)
}
