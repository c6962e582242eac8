// Signatures on the cluster's entries that grant authority (configuration records: accounts, tokens,
// panel users, campaigns, webhooks…; panel sessions), so that write access to NATS alone does not make
// an owner (docs/cluster-security.md). Each value written to those buckets is
//
//   "BSG1" | key id (4 bytes) | HMAC-SHA256 (32 bytes) | the value
//
// the HMAC over the bucket's name, the entry's key and the value, so an entry cannot be forged, altered,
// moved to another key or to another bucket without the key. The HMAC keys are derived from
// BEACON_SECRETS_KEY (HKDF-SHA256, purpose label below): the first key signs, every listed key verifies
// (a rotation, as for sealed secrets). What a signature does not say: that the entry is the key's latest
// (a NATS writer can put back an earlier signed value of the same key, or delete it).

import { createHash, createHmac, hkdfSync, timingSafeEqual } from 'node:crypto'

const MAGIC = Buffer.from('BSG1', 'latin1')
const KEY_ID_BYTES = 4
const MAC_BYTES = 32
const HEADER_BYTES = MAGIC.length + KEY_ID_BYTES + MAC_BYTES
/** The HKDF purpose label: a key derived for signing entries serves nothing else. */
const PURPOSE = 'beacon cluster entry signatures v1'

/** Why an entry was refused: no signature (written by a release before signatures, or forged), a key not configured here, or a signature that does not match. */
export type EntryRefusal = 'unsigned' | 'unknown key' | 'bad signature'

export type OpenedEntry = { ok: true, value: Uint8Array, current: boolean } | { ok: false, why: EntryRefusal }

interface MacKey { id: Buffer, bytes: Buffer }

export class EntrySigner {
  private readonly keys: MacKey[]

  /** `secretsKeys`: BEACON_SECRETS_KEY's raw keys, the first signing, all verifying. */
  constructor (secretsKeys: readonly Buffer[]) {
    if (secretsKeys.length === 0) throw new TypeError('EntrySigner needs at least one key')
    this.keys = secretsKeys.map(secret => {
      const bytes = Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), PURPOSE, 32))
      return { id: createHash('sha256').update(bytes).digest().subarray(0, KEY_ID_BYTES), bytes }
    })
  }

  /** The signed form of `value`, to be written under `key` of `bucket`. */
  sign (bucket: string, key: string, value: Uint8Array): Uint8Array {
    const signer = this.keys[0]!
    const out = Buffer.allocUnsafe(HEADER_BYTES + value.length)
    MAGIC.copy(out, 0)
    signer.id.copy(out, MAGIC.length)
    mac(signer.bytes, bucket, key, value).copy(out, MAGIC.length + KEY_ID_BYTES)
    out.set(value, HEADER_BYTES)
    return out
  }

  /**
   * The value of a stored entry if its signature holds (`current`: signed by the key that signs now),
   * else why it is refused.
   */
  open (bucket: string, key: string, stored: Uint8Array): OpenedEntry {
    const bytes = Buffer.from(stored.buffer, stored.byteOffset, stored.byteLength)
    if (bytes.length < HEADER_BYTES || !bytes.subarray(0, MAGIC.length).equals(MAGIC)) return { ok: false, why: 'unsigned' }
    const id = bytes.subarray(MAGIC.length, MAGIC.length + KEY_ID_BYTES)
    const index = this.keys.findIndex(k => k.id.equals(id))
    if (index < 0) return { ok: false, why: 'unknown key' }
    const value = bytes.subarray(HEADER_BYTES)
    const expected = mac(this.keys[index]!.bytes, bucket, key, value)
    if (!timingSafeEqual(expected, bytes.subarray(MAGIC.length + KEY_ID_BYTES, HEADER_BYTES))) return { ok: false, why: 'bad signature' }
    return { ok: true, value, current: index === 0 }
  }
}

function mac (key: Buffer, bucket: string, entryKey: string, value: Uint8Array): Buffer {
  // Lengths first: no two (bucket, key) pairs give the same input.
  const head = Buffer.from(`${bucket.length}:${bucket}\n${entryKey.length}:${entryKey}\n`, 'utf8')
  return createHmac('sha256', key).update(head).update(value).digest()
}
