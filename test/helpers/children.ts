// Child processes a test starts (Beacons, nats-servers): whatever happens to the test process (a test
// timed out while its child ran), none outlives it.

import type { ChildProcess } from 'node:child_process'

const live = new Set<ChildProcess>()
let hookInstalled = false

/** Kills `child` when the test process exits, unless it has exited by then. */
export function reapAtExit (child: ChildProcess): void {
  if (!hookInstalled) {
    hookInstalled = true
    process.once('exit', () => {
      for (const running of live) {
        try { running.kill('SIGKILL') } catch {}
      }
    })
  }
  live.add(child)
  child.once('exit', () => live.delete(child))
}
