// The admin key: BEACON_ADMIN_KEY if set; otherwise generated on first start and kept in the data
// folder (mode 0600), so the panel's operations are never open to whoever reaches the port.

import { randomBytes } from 'node:crypto'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

export const ADMIN_KEY_FILE = 'admin.key'

export function resolveAdminKey (dataDir: string, configured: string | null): { key: string, generated: boolean, file: string } {
  const file = join(dataDir, ADMIN_KEY_FILE)
  if (configured !== null) return { key: configured, generated: false, file }
  try {
    return { key: readFileSync(file, 'utf8').trim(), generated: false, file }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
  }
  const key = randomBytes(24).toString('base64url')
  writeFileSync(file, key + '\n', { mode: 0o600, flag: 'wx' })
  return { key, generated: true, file }
}
