// `beacon secrets rotate`: seal every stored secret with a new key. The server must be stopped (it
// read its keys at start, and the data folder's lock keeps two writers apart). Steps, each safe to
// crash after: the key file gets the new key first and keeps the old ones for reading; every secret is
// sealed again in one transaction; then the old keys leave the file. A crash in between leaves both
// keys in the file, and the next start (or a second run) finishes the job.

import { existsSync, readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { Store } from '../store/store.js'
import { DataFolderLockedError } from '../store/data-lock.js'
import { newKey, SecretBox, SECRETS_KEY_FILE, writeKeyFile } from '../store/secrets.js'
import { parseKeys } from '../auth/secret-keys.js'
import { sealStoredSecrets } from '../store/seal-secrets.js'
import { CONFIG_SECRET_ROWS } from '../catalog/catalogs.js'
import { CliError } from './errors.js'
import type { Output } from './admin-key.js'

type Env = Record<string, string | undefined>

export async function secretsRotate (env: Env, output: Output): Promise<void> {
  const dataDir = env.BEACON_DATA_DIR || './data'
  if (env.BEACON_SECRETS_KEY !== undefined && env.BEACON_SECRETS_KEY.trim() !== '') {
    throw new CliError('the secrets key comes from the environment (BEACON_SECRETS_KEY), so it is rotated there: ' +
      'set BEACON_SECRETS_KEY="<new key>,<old key>" and restart (Beacon seals every secret with the first key at start), ' +
      'then set BEACON_SECRETS_KEY="<new key>" alone. Make a key with: openssl rand -base64 32')
  }
  if (!existsSync(join(dataDir, 'data.mdb'))) throw new CliError(`no database in ${resolve(dataDir)}; set BEACON_DATA_DIR`)
  const file = join(dataDir, SECRETS_KEY_FILE)
  let old: Buffer[]
  try {
    old = parseKeys(readFileSync(file, 'utf8'), file)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new CliError(`no ${file}: Beacon writes it on its first start`)
    throw new CliError((error as Error).message)
  }
  const key = newKey()
  let store: Store
  try {
    store = new Store({ path: dataDir, durability: 'flushed', secretKeys: [key, ...old] })
  } catch (error) {
    if (error instanceof DataFolderLockedError) throw new CliError(`${error.message}. Stop Beacon before rotating the secrets key.`)
    throw error
  }
  let sealed: number
  try {
    writeKeyFile(dataDir, [key, ...old])
    sealed = sealStoredSecrets(store, CONFIG_SECRET_ROWS)
    writeKeyFile(dataDir, [key])
  } catch (error) {
    throw new CliError(`rotation stopped: ${(error as Error).message}. ${file} keeps the old keys as well; run it again.`)
  } finally {
    await store.close()
  }
  output.err(`Sealed the secrets of ${sealed} record(s) (webhooks, account identity secrets) with the new key ${new SecretBox([key]).primaryId}; ${file} holds only it now (mode 0600).\n`)
}
