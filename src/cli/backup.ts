// `beacon backup --out <dir>`: LMDB's own copy (mdb_env_copy, compacting) of the data folder's
// database, taken through a read-only handle in this process. LMDB serves it from one read
// transaction, so it is a consistent snapshot even while Beacon writes; copying data.mdb with cp is
// not (a copy taken mid-write may be torn). It reads only, so it runs beside a running Beacon (the
// data folder's lock, beacon.pid, is for writers). The copy is the owner's only (folder 0700, file
// 0600), like the data folder: it holds the same visitors' data and credentials.

import { existsSync, mkdirSync, statSync } from 'node:fs'
import { restrict, restrictOwnFolder } from '../store/file-modes.js'
import { join, resolve } from 'node:path'
import { open } from 'lmdb'
import { CliError } from './errors.js'
import type { Output } from './admin-key.js'

const DATA_FILE = 'data.mdb'

export async function backup (dataDir: string, outDir: string, output: Output): Promise<void> {
  if (!existsSync(join(dataDir, DATA_FILE))) throw new CliError(`no database in ${resolve(dataDir)} (no ${DATA_FILE}); set BEACON_DATA_DIR or --data-dir`)
  if (resolve(dataDir) === resolve(outDir)) throw new CliError('--out must be another folder than the data folder')
  if (existsSync(join(outDir, DATA_FILE))) throw new CliError(`${join(outDir, DATA_FILE)} already exists; back up into a new or empty folder`)
  const startMs = performance.now()
  const root = open({ path: dataDir, readOnly: true })
  const umask = process.umask(0o077)
  try {
    mkdirSync(outDir, { recursive: true, mode: 0o700 })
    restrictOwnFolder(outDir)
    await root.backup(outDir, true)
    restrict(join(outDir, DATA_FILE), 0o600)
  } catch (error) {
    throw new CliError(`backup failed: ${(error as Error).message}`)
  } finally {
    process.umask(umask)
    await root.close()
  }
  const bytes = statSync(join(outDir, DATA_FILE)).size
  output.err(`Backed up ${resolve(dataDir)} to ${resolve(outDir)} (${bytes} bytes, ${Math.round(performance.now() - startMs)} ms).\n`)
}
