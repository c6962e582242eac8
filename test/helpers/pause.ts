// SIGSTOP is asynchronous: the kernel stops each thread of the process the next time that thread is
// scheduled, and under load a thread already running can go on for milliseconds (up to ~20 ms seen
// here with both cores busy), long enough for a paused nats-server to answer one more request. Tests
// that pause a process wait until /proc reports every thread stopped.

import { readdirSync, readFileSync } from 'node:fs'

/** SIGSTOP `pid` and resolve once every thread of it is stopped (Linux /proc). */
export async function pauseProcess (pid: number, timeoutMs = 5000): Promise<void> {
  process.kill(pid, 'SIGSTOP')
  const deadline = Date.now() + timeoutMs
  while (!stopped(pid)) {
    if (Date.now() > deadline) throw new Error(`process ${pid} did not stop within ${timeoutMs} ms of SIGSTOP`)
    await new Promise(resolve => setTimeout(resolve, 1))
  }
}

function stopped (pid: number): boolean {
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    // …/stat is "<tid> (<comm>) <state> …"; comm may hold spaces and parentheses, the state follows the last ')'.
    const stat = readFileSync(`/proc/${pid}/task/${task}/stat`, 'utf8')
    const state = stat[stat.lastIndexOf(')') + 2]
    if (state !== 'T' && state !== 't') return false
  }
  return true
}
