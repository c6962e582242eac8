// An event log on a real LMDB store in a temp folder (30 days kept, no size cap), as the store's and
// the saved reports' tests open one before each test.

import { Store } from '../../src/store/store.js'
import { EventLog } from '../../src/store/event-log.js'
import { removeDir, tempDir } from './beacon.js'

export interface TempEventLog {
  store: Store
  log: EventLog
  /** Close the store and remove its folder. */
  close: () => Promise<void>
}

export function openTempEventLog (prefix: string): TempEventLog {
  const dir = tempDir(prefix)
  const store = new Store({ path: dir, durability: 'committed' })
  const log = new EventLog(store, { retentionMs: 30 * 86_400_000, sizeMaxBytes: 0 })
  return {
    store,
    log,
    close: async () => {
      await store.close()
      removeDir(dir)
    },
  }
}
