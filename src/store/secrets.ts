// Secrets at rest (webhook passwords, bearer tokens, signing secrets, credential headers): sealed with
// AES-256-GCM before they reach LMDB, so data.mdb, its backups and a copied volume hold no credential
// in clear. The keys come from BEACON_SECRETS_KEY or from `<data>/secrets.key` (generated on first
// start, mode 0600, like admin.key): one base64 32-byte key per entry, the first seals, every one opens.
// A sealed value names its key (the first 8 hex digits of the key's SHA-256), so a rotation can run
// while old and new values are mixed: seal with the new key, keep the old one for reading until every
// value was sealed again (`beacon secrets rotate`, or a start with both keys in BEACON_SECRETS_KEY).
//
// Plain values (written by a release before this) still open as they are: they are sealed at start.
//
// Reusable: anything that stores a secret calls `box.seal(value)` before the write and
// `box.open(stored)` after the read.

import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto'
import { readFileSync, renameSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseKeys, SECRETS_KEY_BYTES, SecretsKeyError } from '../auth/secret-keys.js'

export const SECRETS_KEY_FILE = 'secrets.key'
/** Sealed values start with this; the rest is `<key id>:<base64url of iv, ciphertext, tag>`. */
export const SEALED_PREFIX = 'beacon-sealed:v1:'

const IV_BYTES = 12
const TAG_BYTES = 16

interface Key {
  id: string
  bytes: Buffer
}

export class SecretBox {
  private readonly keys: Key[]

  /** `keys`: raw 32-byte keys, the first seals, all open. */
  constructor (keys: readonly Buffer[]) {
    if (keys.length === 0) throw new TypeError('SecretBox needs at least one key')
    this.keys = keys.map(bytes => ({ id: keyId(bytes), bytes }))
  }

  /**
   * The raw keys, the first sealing: for keys derived from them for another purpose (HKDF with a purpose
   * label: the cluster's entry signatures, src/cluster/entry-signer.ts; its key fingerprint).
   */
  get rawKeys (): readonly Buffer[] { return this.keys.map(key => key.bytes) }

  /** The id of the key that seals (sealed values name it). */
  get primaryId (): string { return this.keys[0]!.id }

  seal (plain: string): string {
    const key = this.keys[0]!
    const iv = randomBytes(IV_BYTES)
    const cipher = createCipheriv('aes-256-gcm', key.bytes, iv)
    // The key id is authenticated too: a value cannot be passed off as sealed by another key.
    cipher.setAAD(Buffer.from(key.id))
    const body = Buffer.concat([iv, cipher.update(plain, 'utf8'), cipher.final(), cipher.getAuthTag()])
    return `${SEALED_PREFIX}${key.id}:${body.toString('base64url')}`
  }

  /** The plain value of a stored one (a plain value from an earlier release is returned as it is). */
  open (stored: string): string {
    if (!isSealed(stored)) return stored
    const rest = stored.slice(SEALED_PREFIX.length)
    const colon = rest.indexOf(':')
    const id = rest.slice(0, colon)
    const key = this.keys.find(k => k.id === id)
    if (key === undefined) {
      throw new SecretsKeyError(`a stored secret was sealed with key ${id}, which is not configured (BEACON_SECRETS_KEY or ${SECRETS_KEY_FILE}); keys here: ${this.keys.map(k => k.id).join(', ')}`)
    }
    const body = Buffer.from(rest.slice(colon + 1), 'base64url')
    try {
      const decipher = createDecipheriv('aes-256-gcm', key.bytes, body.subarray(0, IV_BYTES))
      decipher.setAAD(Buffer.from(id))
      decipher.setAuthTag(body.subarray(body.length - TAG_BYTES))
      return Buffer.concat([decipher.update(body.subarray(IV_BYTES, body.length - TAG_BYTES)), decipher.final()]).toString('utf8')
    } catch {
      throw new SecretsKeyError(`a stored secret sealed with key ${id} does not open: it was altered, or the key is not the one it was sealed with`)
    }
  }

  /** Whether a stored value is sealed with the key that seals now (nothing to do for it). */
  isCurrent (stored: string): boolean {
    return stored.startsWith(SEALED_PREFIX + this.primaryId + ':')
  }
}

export function isSealed (stored: string): boolean {
  return stored.startsWith(SEALED_PREFIX)
}

function keyId (bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex').slice(0, 8)
}

export function newKey (): Buffer {
  return randomBytes(SECRETS_KEY_BYTES)
}

/** Write the key file (first key seals), mode 0600, atomically: a crash leaves the old file or the new. */
export function writeKeyFile (dataDir: string, keys: readonly Buffer[]): void {
  const file = join(dataDir, SECRETS_KEY_FILE)
  const temp = `${file}.${process.pid}.tmp`
  writeFileSync(temp, keys.map(key => key.toString('base64')).join('\n') + '\n', { mode: 0o600, flag: 'w' })
  renameSync(temp, file)
}

/**
 * The keys: from BEACON_SECRETS_KEY when set, else from the data folder's key file, generated there
 * on first use.
 */
export function resolveSecretsKeys (dataDir: string, configured: string | null): { keys: Buffer[], from: 'BEACON_SECRETS_KEY' | 'file', generated: boolean } {
  if (configured !== null) return { keys: parseKeys(configured, 'BEACON_SECRETS_KEY'), from: 'BEACON_SECRETS_KEY', generated: false }
  const file = join(dataDir, SECRETS_KEY_FILE)
  try {
    return { keys: parseKeys(readFileSync(file, 'utf8'), file), from: 'file', generated: false }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
  }
  const key = newKey()
  writeFileSync(file, key.toString('base64') + '\n', { mode: 0o600, flag: 'wx' })
  return { keys: [key], from: 'file', generated: true }
}
