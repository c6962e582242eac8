// Owner-only modes for what holds visitors' data and credentials: the data folder 0700, its files
// 0600, backups alike. A folder is tightened only when it is Beacon's own (it holds nothing but
// Beacon's files): pointed at a shared folder (a project folder, /tmp), Beacon must not lock others out.

import { chmodSync, readdirSync, statSync } from 'node:fs'
import { log } from '../log.js'

/** What Beacon keeps in a data folder (and a backup), temp files of its atomic writes aside. */
const OWN_FILES = new Set(['data.mdb', 'lock.mdb', 'admin.key', 'admin.key.unshown', 'secrets.key', 'beacon.pid'])
const OWN_TEMP = /^(admin|secrets)\.key\.\d+\.tmp$/

/** chmod, where this process may (a file owned by another user keeps its mode). */
export function restrict (path: string, mode: number): void {
  try {
    chmodSync(path, mode)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code !== 'EPERM' && code !== 'ENOENT') throw error
  }
}

/** Make the folder 0700 if it holds only Beacon's files; otherwise leave it and say so once. */
export function restrictOwnFolder (path: string): void {
  if ((statSync(path).mode & 0o077) === 0) return
  const others = readdirSync(path).filter(name => !OWN_FILES.has(name) && !OWN_TEMP.test(name))
  if (others.length === 0) return restrict(path, 0o700)
  log.warn({ folder: path, mode: (statSync(path).mode & 0o777).toString(8), otherFiles: others.length },
    'the folder holds files that are not Beacon\'s, so its mode is left as it is; give Beacon a folder of its own (mode 0700)')
}
