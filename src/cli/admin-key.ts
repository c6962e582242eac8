// `beacon admin-key [--rotate]`: the key file in the data folder. Printing reads it; rotating writes a
// new one atomically (a temp file in the same folder, mode 0600, renamed over the old one), so a crash
// never leaves a half-written key. A running Beacon read its key at start: it needs a restart.

import { randomBytes } from 'node:crypto'
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { ADMIN_KEY_FILE } from '../admin-key.js'
import { CliError } from './errors.js'

/** Random bytes in a generated key (base64url: 32 characters), as the server generates them. */
export const ADMIN_KEY_BYTES = 24

type Env = Record<string, string | undefined>

export interface Output {
  out: (text: string) => void
  err: (text: string) => void
}

export function adminKeyCommand (rotate: boolean, env: Env, output: Output): void {
  const dataDir = env.BEACON_DATA_DIR || './data'
  const file = join(dataDir, ADMIN_KEY_FILE)
  if (env.BEACON_ADMIN_KEY !== undefined && env.BEACON_ADMIN_KEY !== '') {
    throw new CliError(`the admin key comes from the environment (BEACON_ADMIN_KEY), so ${file} is not used` +
      (rotate ? '. To rotate it, set a new BEACON_ADMIN_KEY (16 characters or more) and restart Beacon.' : '.'))
  }
  if (!rotate) {
    let key: string
    try {
      key = readFileSync(file, 'utf8').trim()
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw new CliError(`cannot read ${file}: ${(error as Error).message}`)
      throw new CliError(`no admin key yet: ${file} does not exist. Beacon writes one on its first start, or run "beacon admin-key --rotate".`)
    }
    output.out(key + '\n')
    return
  }
  const key = randomBytes(ADMIN_KEY_BYTES).toString('base64url')
  const temp = `${file}.${process.pid}.tmp`
  try {
    mkdirSync(dataDir, { recursive: true })
    writeFileSync(temp, key + '\n', { mode: 0o600, flag: 'wx' })
    renameSync(temp, file)
  } catch (error) {
    throw new CliError(`cannot write ${file}: ${(error as Error).message}`)
  }
  output.out(key + '\n')
  output.err(`Wrote a new admin key to ${file} (mode 0600). A running Beacon keeps the old key until it is restarted.\n`)
}
