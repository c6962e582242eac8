// A seeded random source (mulberry32) for the chaos run: the seed fixes the nemesis's choices and the
// clients' operations and keys, so a run can be repeated with the same schedule (timing still varies).

export class Rng {
  private state: number

  constructor (seed: number) {
    this.state = seed >>> 0
  }

  /** A float in [0, 1). */
  next (): number {
    this.state = (this.state + 0x6D2B79F5) >>> 0
    let t = this.state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }

  /** An integer in [min, max]. */
  int (min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1))
  }

  pick<T> (items: readonly T[]): T {
    if (items.length === 0) throw new Error('pick from nothing')
    return items[Math.floor(this.next() * items.length)]!
  }

  /** A UUID version 4 (as Beacon wants visitor ids) made of this source's bits. */
  uuid (): string {
    const bytes = Array.from({ length: 16 }, () => Math.floor(this.next() * 256))
    bytes[6] = (bytes[6]! & 0x0f) | 0x40
    bytes[8] = (bytes[8]! & 0x3f) | 0x80
    const hex = bytes.map(byte => byte.toString(16).padStart(2, '0')).join('')
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
  }

  /** Another source, derived from this one (one per client). */
  fork (): Rng {
    return new Rng(Math.floor(this.next() * 4294967296))
  }
}
