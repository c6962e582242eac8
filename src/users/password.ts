// Panel passwords: scrypt (node:crypto) with a random salt per password, compared in constant time.
// Stored as `scrypt$N$r$p$<salt>$<hash>` (base64url), so the cost can be raised later without losing
// the passwords hashed under the old one.

import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto'
import { Gate } from './gate.js'

const COST = { N: 16384, r: 8, p: 1 } as const
const KEY_BYTES = 32
const SALT_BYTES = 16

export const PASSWORD_LENGTH_MIN = 12
export const PASSWORD_LENGTH_MAX = 256

/** Two hashes at once leave libuv's other threads to the rest of Beacon; 100 more may wait. */
const gate = new Gate(2, 100)

function derive (password: string, salt: Buffer, options: ScryptOptions): Promise<Buffer> {
  return gate.run(() => new Promise((resolve, reject) => {
    scrypt(password.normalize('NFC'), salt, KEY_BYTES, { ...options, maxmem: 64 * 1024 * 1024 }, (error, key) => error === null ? resolve(key) : reject(error))
  }))
}

export async function hashPassword (password: string): Promise<string> {
  const salt = randomBytes(SALT_BYTES)
  const key = await derive(password, salt, COST)
  return `scrypt$${COST.N}$${COST.r}$${COST.p}$${salt.toString('base64url')}$${key.toString('base64url')}`
}

export async function verifyPassword (password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split('$')
  if (scheme !== 'scrypt' || salt === undefined || hash === undefined) return false
  const expected = Buffer.from(hash, 'base64url')
  const key = await derive(password, Buffer.from(salt, 'base64url'), { N: Number(n), r: Number(r), p: Number(p) })
  return key.length === expected.length && timingSafeEqual(key, expected)
}

/** A hash no password matches: verified against when the email is unknown, so both cases take as long. */
export const DECOY_HASH = `scrypt$${COST.N}$${COST.r}$${COST.p}$${randomBytes(SALT_BYTES).toString('base64url')}$${randomBytes(KEY_BYTES).toString('base64url')}`

/** A password for `beacon users add`: 24 characters of base64url (144 bits). */
export function generatePassword (): string {
  return randomBytes(18).toString('base64url')
}
