// HyperLogLog: unique visitors per report bucket in a fixed 2 KiB, whatever the traffic. 2^11
// registers of the longest run of leading zeros seen (+1) among the hashes that fall in them; the
// estimate's standard error is 1.04 / sqrt(2048) ≈ 2.3 %. Two sketches merge by register-wise max
// (an hour's visitors into the day's). Small counts use linear counting (exact enough below ~5 k).
// The hash is 32 bits (FNV-1a with murmur3's finalizer), so estimates past ~100 million lose accuracy.

import { assert } from '../assert.js'

export const HLL_BITS = 11
export const HLL_REGISTERS = 1 << HLL_BITS
const ALPHA = 0.7213 / (1 + 1.079 / HLL_REGISTERS)

export class HyperLogLog {
  readonly registers: Uint8Array

  constructor (registers?: Uint8Array) {
    // A sketch read back from the store must be one this code wrote: a shorter one would count wrong silently.
    assert(registers === undefined || registers.length === HLL_REGISTERS, 'a HyperLogLog sketch has HLL_REGISTERS registers', { length: registers?.length, expected: HLL_REGISTERS })
    this.registers = registers === undefined ? new Uint8Array(HLL_REGISTERS) : Uint8Array.from(registers)
  }

  add (value: string): void {
    this.addHash(hash32(value))
  }

  addHash (hash: number): void {
    const index = hash >>> (32 - HLL_BITS)
    // Leading zeros of the remaining bits, + 1 (a sentinel bit bounds it when they are all zero).
    const rank = Math.clz32((hash << HLL_BITS) | (1 << (HLL_BITS - 1))) + 1
    if (rank > this.registers[index]!) this.registers[index] = rank
  }

  merge (other: Uint8Array): void {
    assert(other.length === HLL_REGISTERS, 'a merged HyperLogLog sketch has HLL_REGISTERS registers', { length: other.length, expected: HLL_REGISTERS })
    const registers = this.registers
    for (let i = 0; i < HLL_REGISTERS; i++) if (other[i]! > registers[i]!) registers[i] = other[i]!
  }

  estimate (): number {
    let sum = 0
    let zeros = 0
    for (let i = 0; i < HLL_REGISTERS; i++) {
      const r = this.registers[i]!
      sum += 2 ** -r
      if (r === 0) zeros++
    }
    const raw = ALPHA * HLL_REGISTERS * HLL_REGISTERS / sum
    if (raw <= 2.5 * HLL_REGISTERS && zeros > 0) return Math.round(HLL_REGISTERS * Math.log(HLL_REGISTERS / zeros))
    return Math.round(raw)
  }
}

/** FNV-1a over UTF-16 code units, then murmur3's fmix32 so every bit depends on every input bit. */
export function hash32 (text: string): number {
  let h = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h >>> 0
}
