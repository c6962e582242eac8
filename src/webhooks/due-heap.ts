// The worker's queue: a binary min-heap of pending groups ordered by due time, then arrival.
// Items wait here for their delay (occurredAtMs + delayMs), a rate token, a free in-flight slot,
// or an in-memory retry.

import type { AttemptRecord, DeliveryItem } from './types.js'

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
  private readonly nodes: Pending[] = []

  get size (): number {
    return this.nodes.length
  }

  peek (): Pending | undefined {
    return this.nodes[0]
  }

  push (node: Pending): void {
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

  pop (): Pending | undefined {
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

  /** Remove and return everything, in due order. */
  drain (): Pending[] {
    const out: Pending[] = []
    for (let node = this.pop(); node !== undefined; node = this.pop()) out.push(node)
    return out
  }
}

function before (a: Pending, b: Pending): boolean {
  return a.dueMs < b.dueMs || (a.dueMs === b.dueMs && a.seq < b.seq)
}
