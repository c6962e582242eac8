// The keys that seal secrets at rest (src/store/secrets.ts), as an operator writes them: the base64
// of 32 random bytes each, one per line in the key file or comma-separated in BEACON_SECRETS_KEY.
// Here, below the store, so that reading the configuration can check them too.

export const SECRETS_KEY_BYTES = 32

/** A key is malformed or missing, or a stored value could not be opened (its key is not configured, or it was altered). */
export class SecretsKeyError extends Error {
  constructor (message: string) {
    super(message)
    this.name = 'SecretsKeyError'
  }
}

/**
 * Parse keys written one per line (the key file) or comma-separated (BEACON_SECRETS_KEY): each the
 * base64 of 32 bytes. Throws with a message naming the source and the entry.
 */
export function parseKeys (text: string, source: string): Buffer[] {
  const parts = text.split(/[\n,]/).map(part => part.trim()).filter(part => part !== '')
  if (parts.length === 0) throw new SecretsKeyError(`${source}: no key (expected the base64 of ${SECRETS_KEY_BYTES} random bytes)`)
  return parts.map((part, index) => {
    const bytes = Buffer.from(part, 'base64')
    if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(part) || bytes.length !== SECRETS_KEY_BYTES) {
      throw new SecretsKeyError(`${source}: entry ${index + 1} is not the base64 of ${SECRETS_KEY_BYTES} bytes (make one with: openssl rand -base64 32)`)
    }
    return bytes
  })
}
