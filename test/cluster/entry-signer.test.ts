import { expect } from 'chai'
import { randomBytes } from 'node:crypto'
import { EntrySigner } from '../../src/cluster/entry-signer.js'

describe('EntrySigner: entries that grant authority, signed with a key derived from BEACON_SECRETS_KEY', () => {
  const key = randomBytes(32)
  const signer = new EntrySigner([key])
  const value = Buffer.from('{"role":"owner"}')

  it('opens what it signed, for the same bucket and key only', () => {
    const signed = signer.sign('BEACON_CONFIG_c', 'users.u1', value)
    expect(signer.open('BEACON_CONFIG_c', 'users.u1', signed)).to.deep.equal({ ok: true, value, current: true })
    expect(signer.open('BEACON_CONFIG_c', 'users.u2', signed)).to.deep.equal({ ok: false, why: 'bad signature' })
    expect(signer.open('BEACON_CONFIG_d', 'users.u1', signed)).to.deep.equal({ ok: false, why: 'bad signature' })
    // Length-prefixed: moving a character between the bucket and the key changes the input.
    expect(signer.open('BEACON_CONFIG_', 'cusers.u1', signed)).to.deep.equal({ ok: false, why: 'bad signature' })
  })

  it('refuses an altered value, an unsigned one and one signed with another key', () => {
    const signed = Buffer.from(signer.sign('b', 'k', value))
    for (let i = 4; i < signed.length; i += 7) {
      const altered = Buffer.from(signed)
      altered[i] = altered[i]! ^ 1
      const opened = signer.open('b', 'k', altered)
      expect(opened.ok, `byte ${i} flipped`).to.equal(false)
    }
    expect(signer.open('b', 'k', value)).to.deep.equal({ ok: false, why: 'unsigned' })
    expect(signer.open('b', 'k', Buffer.alloc(0))).to.deep.equal({ ok: false, why: 'unsigned' })
    expect(signer.open('b', 'k', new EntrySigner([randomBytes(32)]).sign('b', 'k', value))).to.deep.equal({ ok: false, why: 'unknown key' })
  })

  it('verifies with every listed key and signs with the first (a rotation)', () => {
    const next = randomBytes(32)
    const rotated = new EntrySigner([next, key])
    expect(rotated.open('b', 'k', signer.sign('b', 'k', value))).to.deep.equal({ ok: true, value, current: false })
    expect(rotated.open('b', 'k', rotated.sign('b', 'k', value))).to.deep.equal({ ok: true, value, current: true })
    expect(signer.open('b', 'k', rotated.sign('b', 'k', value))).to.deep.equal({ ok: false, why: 'unknown key' })
  })

  it('never holds the secrets key itself in what it writes', () => {
    const signed = Buffer.from(signer.sign('b', 'k', value))
    expect(signed.includes(key.subarray(0, 8))).to.equal(false)
  })
})
