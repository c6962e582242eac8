// The benchmarks' child processes and temp folders: every child tracked here is killed and every folder
// removed when the benchmark exits, however it exits (an error, Ctrl-C, SIGTERM).

import type { ChildProcess } from 'node:child_process'
import { rmSync } from 'node:fs'

const children = new Set<ChildProcess>()
/** Folders removed at exit (a benchmark may remove one earlier and delete it from here). */
export const tempDirs = new Set<string>()

/** Kills the tracked children and removes the folders now (also run at exit). */
export function cleanup (): void {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  children.clear()
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true })
  tempDirs.clear()
}

/** Installs the exit and signal hooks; `name` prefixes the line a signal prints. */
export function cleanUpOnExit (name: string): void {
  process.on('exit', cleanup)
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      process.stderr.write(`\n${name}: ${signal}, stopping\n`)
      cleanup()
      process.exit(130)
    })
  }
}

/** Kills `child` at exit if it is still running then. */
export function track (child: ChildProcess): ChildProcess {
  children.add(child)
  child.once('exit', () => children.delete(child))
  return child
}
