// One process per data folder, as PostgreSQL's postmaster.pid: the process that opens the store
// creates `beacon.pid` in the folder with O_EXCL, holding its PID and the start time of that PID
// (/proc/<pid>/stat), and removes it when it closes the store. Two processes on one folder would
// each keep their own in-memory catalogs and actors over the same LMDB: lost updates, a revoked token
// still working in the other, webhooks sent twice or never.
//
// Node has no flock, so a file left by a process that was SIGKILLed is told apart by a liveness check:
// the recorded PID no longer runs, or runs with another start time (the PID was reused, e.g. PID 1
// in a container restarted on the same volume). Such a stale file is replaced.

import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs'
import { join, resolve } from 'node:path'

export const LOCK_FILE = 'beacon.pid'

/** Another live process holds the data folder. */
export class DataFolderLockedError extends Error {
  readonly pid: number
  constructor (dataDir: string, pid: number) {
    super(`the data folder ${resolve(dataDir)} is in use by another Beacon process (PID ${pid}, see ${join(resolve(dataDir), LOCK_FILE)}); ` +
      'stop it first, or give this one another BEACON_DATA_DIR')
    this.name = 'DataFolderLockedError'
    this.pid = pid
  }
}

export interface DataLock {
  readonly file: string
  release: () => void
}

/** Paths locked by this process: a second Store on a folder this process holds is refused too. */
const held = new Set<string>()

/** Take the folder's lock, or throw DataFolderLockedError naming the holder. */
export function lockDataFolder (dataDir: string): DataLock {
  const file = join(resolve(dataDir), LOCK_FILE)
  if (held.has(file)) throw new DataFolderLockedError(dataDir, process.pid)
  const content = `${process.pid}\n${startTimeOf(process.pid) ?? ''}\n`
  // Twice at most: a stale file is removed once, then the create must succeed.
  for (let tries = 0; ; tries++) {
    try {
      const fd = openSync(file, 'wx', 0o600)
      try {
        writeSync(fd, content)
      } finally {
        closeSync(fd)
      }
      break
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST' || tries > 0) throw error
    }
    const holder = readHolder(file)
    if (holder !== null && isAlive(holder.pid, holder.startTime)) throw new DataFolderLockedError(dataDir, holder.pid)
    removeIfPresent(file)
  }
  held.add(file)
  let released = false
  return {
    file,
    release () {
      if (released) return
      released = true
      held.delete(file)
      // Only our own file: never one a later holder wrote after ours was judged stale.
      if (readHolder(file)?.pid === process.pid) removeIfPresent(file)
    },
  }
}

/** The PID (and its start time, when it was known) in a lock file; null when unreadable or torn. */
export function readHolder (file: string): { pid: number, startTime: string | null } | null {
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch {
    return null
  }
  const [pidLine, startLine] = text.split('\n')
  const pid = Number(pidLine)
  if (!Number.isInteger(pid) || pid <= 0) return null
  return { pid, startTime: startLine === undefined || startLine === '' ? null : startLine }
}

function isAlive (pid: number, startTime: string | null): boolean {
  // Our own PID in a file we do not hold: left by an earlier process that had the same PID.
  if (pid === process.pid) return false
  try {
    process.kill(pid, 0)
  } catch (error) {
    // EPERM: it runs, as another user.
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false
  }
  if (startTime === null) return true
  const now = startTimeOf(pid)
  return now === null || now === startTime
}

/** Field 22 of /proc/<pid>/stat (start time in clock ticks since boot); null where there is no /proc. */
function startTimeOf (pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The command name (field 2) is in parentheses and may hold spaces: count fields after it.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return fields[19] ?? null
  } catch {
    return null
  }
}

function removeIfPresent (file: string): void {
  try {
    unlinkSync(file)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
  }
}
