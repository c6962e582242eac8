import { expect } from 'chai'
import { DueHeap, type Pending } from '../../src/delivery/due-heap.js'

/** Earlier due time first, then earlier arrival: the order the worker sends in. */
function byDue (a: Pending, b: Pending): number {
  return a.dueMs - b.dueMs || a.seq - b.seq
}

/** xorshift32: the same sequence on every run. */
function random (seed: number): () => number {
  let x = seed
  return () => {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    return (x >>> 0) / 2 ** 32
  }
}

describe('DueHeap', () => {
  let seq: number
  const node = (dueMs: number): Pending => ({ items: [], attempt: 1, history: [], dueMs, seq: seq++, fixed: false })

  beforeEach(() => {
    seq = 0
  })

  it('gives groups pushed out of order back in due order, then arrival order', () => {
    const heap = new DueHeap()
    const pushed = [50, 10, 30, 30, 5, 60, 60, 20].map(node)
    for (const p of pushed) heap.push(p)
    expect(heap.size).to.equal(8)
    expect(heap.peek()).to.equal(pushed[4])
    expect(heap.drain()).to.deep.equal([...pushed].sort(byDue))
    expect(heap.size).to.equal(0)
    expect(heap.peek()).to.equal(undefined)
    expect(heap.pop()).to.equal(undefined)
  })

  it('interleaves groups pushed in order with earlier ones pushed later', () => {
    const heap = new DueHeap()
    const a = node(10)
    const b = node(20)
    const c = node(30)
    for (const p of [a, b, c]) heap.push(p)
    const early = node(15) // due before the last one pushed
    const retry = node(5)
    heap.push(early)
    heap.push(retry)
    expect(heap.pop()).to.equal(retry)
    expect(heap.pop()).to.equal(a)
    expect(heap.pop()).to.equal(early)
    const late = node(25)
    heap.push(late)
    expect(heap.drain()).to.deep.equal([b, late, c])
  })

  it('matches a sorted list over random pushes and pops (mostly in order, as fresh items come)', () => {
    const next = random(20261123)
    for (let trial = 0; trial < 300; trial++) {
      const heap = new DueHeap()
      const expected: Pending[] = []
      let dueMs = 1000
      for (let op = 0; op < 400; op++) {
        if (next() < 0.6) {
          // Mostly the same or a later time; now and then an earlier one (a shorter delay, a retry).
          dueMs += next() < 0.85 ? Math.floor(next() * 3) : -Math.floor(next() * 40)
          const p = node(dueMs)
          heap.push(p)
          expected.push(p)
          expected.sort(byDue)
        } else {
          expect(heap.pop()).to.equal(expected.shift())
        }
        expect(heap.size).to.equal(expected.length)
        expect(heap.peek()).to.equal(expected[0])
      }
      expect(heap.drain()).to.deep.equal(expected)
    }
  })

  it('keeps its order across a long run taken from the front (the run is compacted as it goes)', () => {
    const heap = new DueHeap()
    const expected: Pending[] = []
    for (let i = 0; i < 20_000; i++) {
      const p = node(i)
      heap.push(p)
      expected.push(p)
      if (i % 3 === 2) expect(heap.pop()).to.equal(expected.shift())
    }
    expect(heap.size).to.equal(expected.length)
    expect(heap.drain()).to.deep.equal(expected)
  })
})
