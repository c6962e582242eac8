// The admin key: BEACON_ADMIN_KEY if set; otherwise generated on first start and kept in the data
// folder (mode 0600), so the panel's operations are never open to whoever reaches the port.
//
// A generated key is printed once, by the first start that got as far as listening: a start that
// fails (busy port, NATS away) keeps the key on disk with a marker beside it, and the next successful
// start prints it and removes the marker.

import { randomBytes } from 'node:crypto'
import { readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs'
import { join } from 'node:path'

export const ADMIN_KEY_FILE = 'admin.key'
/** Beside the key file while the generated key has not been printed by a start that listened. */
export const ADMIN_KEY_UNSHOWN_FILE = 'admin.key.unshown'

export interface AdminKey {
  key: string
  /** A generated key no successful start has printed yet. */
  unshown: boolean
  file: string
}

export function resolveAdminKey (dataDir: string, configured: string | null): AdminKey {
  const file = join(dataDir, ADMIN_KEY_FILE)
  if (configured !== null) return { key: configured, unshown: false, file }
  try {
    return { key: readFileSync(file, 'utf8').trim(), unshown: existsSync(join(dataDir, ADMIN_KEY_UNSHOWN_FILE)), file }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
  }
  const key = randomBytes(24).toString('base64url')
  writeFileSync(join(dataDir, ADMIN_KEY_UNSHOWN_FILE), '', { mode: 0o600 })
  writeFileSync(file, key + '\n', { mode: 0o600, flag: 'wx' })
  return { key, unshown: true, file }
}

/** The key was printed by a start that listened: later starts stay quiet about it. */
export function markAdminKeyShown (dataDir: string): void {
  rmSync(join(dataDir, ADMIN_KEY_UNSHOWN_FILE), { force: true })
}
