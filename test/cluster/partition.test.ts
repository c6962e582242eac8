import { expect } from 'chai'
import { fnv1a32, partitionOf } from '../../src/cluster/partition.js'

/** The documented definition, written the slow way (Buffer, concatenation) to check the fast one. */
function reference (account: string, id: string, partitions: number): number {
  const bytes = Buffer.concat([Buffer.from(account, 'utf8'), Buffer.from([0xff]), Buffer.from(id, 'utf8')])
  let h = 0x811c9dc5
  for (const byte of bytes) h = Math.imul(h ^ byte, 0x01000193)
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return (h >>> 0) % partitions
}

describe('cluster partition of (account, id)', () => {
  it('computes FNV-1a 32-bit with the published test vectors', () => {
    expect(fnv1a32('')).to.equal(0x811c9dc5)
    expect(fnv1a32('a')).to.equal(0xe40c292c)
    expect(fnv1a32('foobar')).to.equal(0xbf9cf968)
  })

  it('places keys where every version placed them (known answers)', () => {
    // Pinned: changing any of these moves stored keys to other partitions.
    const known: Array<[string, string, number, number]> = [
      ['acme', 'v-1', 47, 431],
      ['acme', 'v-2', 0, 448],
      ['shop', 'visitor-42', 23, 855],
      ['a', 'bc', 4, 132],
      ['ab', 'c', 3, 963],
      ['é', '😀', 52, 1012],
      ['', '', 29, 541],
    ]
    for (const [account, id, at64, at1024] of known) {
      expect(partitionOf(account, id, 64), `${account}/${id}`).to.equal(at64)
      expect(partitionOf(account, id, 1024), `${account}/${id}`).to.equal(at1024)
    }
  })

  it('hashes the UTF-8 bytes: multi-byte, astral and lone-surrogate text as Buffer.from encodes it', () => {
    const samples = ['plain', 'café', 'Ωmega', '日本語', '😀👍🏽', 'x\ud800y', 'tail\udc00', '\ud83d', 'ﬀ\u0000\u07ff\u0800\uffff']
    for (const account of samples) {
      for (const id of samples) {
        for (const partitions of [1, 7, 64, 1000]) {
          expect(partitionOf(account, id, partitions), `${account}/${id}/${partitions}`).to.equal(reference(account, id, partitions))
        }
      }
    }
  })

  it('tells the account from the id (the separator is part of the key)', () => {
    expect(partitionOf('a', 'bc', 1 << 30)).not.to.equal(partitionOf('ab', 'c', 1 << 30))
  })

  it('stays in [0, P) and spreads sequential ids evenly over 64 partitions', () => {
    const partitions = 64
    const counts = new Array<number>(partitions).fill(0)
    const keys = 128_000
    for (let i = 0; i < keys; i++) {
      const p = partitionOf(`account-${i % 7}`, `visitor-${i}`, partitions)
      if (!(p >= 0 && p < partitions && Number.isInteger(p))) expect.fail(`partition ${p} out of range`)
      counts[p]!++
    }
    const expected = keys / partitions
    // 2000 per partition: a binomial spread has a standard deviation of about 44; ±10 % is 4.5 sigma.
    for (const count of counts) expect(count).to.be.within(expected * 0.9, expected * 1.1)
  })
})
