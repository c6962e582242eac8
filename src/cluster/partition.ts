// Placement of a key in cluster mode: a stable hash of (account, id) picks one of P partitions.
//
// The function is part of the stored data's format: a cluster's partitions are fixed when it is created,
// and every node, of every version, must put a key in the same partition. So it is spelled out here and
// pinned by known-answer tests:
//   h = FNV-1a 32-bit over UTF-8(account) · 0xFF · UTF-8(id)
//       (0xFF never occurs in UTF-8, so ('ab', 'c') and ('a', 'bc') differ; a lone surrogate is encoded
//       as U+FFFD, as Buffer.from(string, 'utf8') and TextEncoder do)
//   h = murmur3's 32-bit finalizer (fmix32) of h, so that every bit of the key reaches the low bits
//   partition = h mod P
// UTF-8 is produced on the fly from char codes: no Buffer, no string concatenation, no allocation per call.

const FNV_OFFSET = 0x811c9dc5
const FNV_PRIME = 0x01000193
const SEPARATOR = 0xff

/** The partition of (account, id) among `partitions` (an integer ≥ 1): in [0, partitions). */
export function partitionOf (account: string, id: string, partitions: number): number {
  let h = fnv1a(FNV_OFFSET, account)
  h = Math.imul(h ^ SEPARATOR, FNV_PRIME)
  h = fnv1a(h, id)
  return (fmix32(h) >>> 0) % partitions
}

/** FNV-1a 32-bit of a string's UTF-8 bytes, unsigned. Exported for the known-answer tests. */
export function fnv1a32 (text: string): number {
  return fnv1a(FNV_OFFSET, text) >>> 0
}

function fnv1a (seed: number, text: string): number {
  let h = seed
  const length = text.length
  for (let i = 0; i < length; i++) {
    let c = text.charCodeAt(i)
    if (c < 0x80) {
      h = Math.imul(h ^ c, FNV_PRIME)
      continue
    }
    if (c < 0x800) {
      h = Math.imul(h ^ (0xc0 | (c >> 6)), FNV_PRIME)
      h = Math.imul(h ^ (0x80 | (c & 0x3f)), FNV_PRIME)
      continue
    }
    if (c >= 0xd800 && c <= 0xdfff) {
      const next = i + 1 < length ? text.charCodeAt(i + 1) : 0
      if (c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (next - 0xdc00)
        i++
        h = Math.imul(h ^ (0xf0 | (c >> 18)), FNV_PRIME)
        h = Math.imul(h ^ (0x80 | ((c >> 12) & 0x3f)), FNV_PRIME)
        h = Math.imul(h ^ (0x80 | ((c >> 6) & 0x3f)), FNV_PRIME)
        h = Math.imul(h ^ (0x80 | (c & 0x3f)), FNV_PRIME)
        continue
      }
      c = 0xfffd
    }
    h = Math.imul(h ^ (0xe0 | (c >> 12)), FNV_PRIME)
    h = Math.imul(h ^ (0x80 | ((c >> 6) & 0x3f)), FNV_PRIME)
    h = Math.imul(h ^ (0x80 | (c & 0x3f)), FNV_PRIME)
  }
  return h
}

function fmix32 (value: number): number {
  let h = value
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h
}
