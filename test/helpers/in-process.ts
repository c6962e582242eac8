// An in-process Beacon with a clock the test moves by hand, still driven over real HTTP with a real
// LMDB folder: for behaviour that depends on time passing (windows, expiry, caps).

import { loadConfig } from '../../src/config.js'
import { startBeacon, type Beacon } from '../../src/app.js'
import { ADMIN_KEY, removeDir, tempDir } from './beacon.js'

export interface ManualClock {
  nowMs: () => number
  advance: (ms: number) => void
}

export function manualClock (startMs = Date.UTC(2026, 0, 5, 12)): ManualClock {
  let now = startMs
  return { nowMs: () => now, advance: ms => { now += ms } }
}

export interface InProcess {
  beacon: Beacon
  url: string
  clock: ManualClock
  dataDir: string
  close: () => Promise<void>
}

export async function startInProcess (dataDir = tempDir()): Promise<InProcess> {
  const clock = manualClock()
  const config = loadConfig({ BEACON_HOST: '127.0.0.1', BEACON_PORT: '0', BEACON_DATA_DIR: dataDir, BEACON_SEGMENT_SWEEP_MS: '3600000' })
  const beacon = await startBeacon({ config, adminKey: ADMIN_KEY, clock })
  return {
    beacon,
    url: `http://127.0.0.1:${beacon.port}`,
    clock,
    dataDir,
    async close () {
      await beacon.stop()
      removeDir(dataDir)
    },
  }
}

/** The audience events in the outbox, oldest first. */
export function audienceEvents (beacon: Beacon): Record<string, unknown>[] {
  return [...beacon.store.outbox.getRange()].map(({ value }) => value as Record<string, unknown>).filter(row => row.kind === 'audience')
}
