// CPU time from /proc (Linux), for the benchmarks that split a run's CPU between processes.

import { readFileSync } from 'node:fs'

/** utime + stime of a process (all its threads), in seconds (USER_HZ 100); 0 once it is gone. */
export function processCpu (pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return (Number(fields[11]) + Number(fields[12])) / 100
  } catch {
    return 0
  }
}

/** Busy CPU seconds of the whole machine: everything but idle and iowait. */
export function machineCpu (): number {
  const ticks = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).slice(1).map(Number)
  return (ticks[0]! + ticks[1]! + ticks[2]! + ticks[5]! + ticks[6]! + (ticks[7] ?? 0)) / 100
}
