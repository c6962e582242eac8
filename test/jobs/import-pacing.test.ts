// An import's pause between steps (src/jobs/import-jobs.ts, importPauseMs): as long as the step while
// nothing else used the event loop in the last pause, IMPORT_PAUSE_LIVE_FACTOR times as long while live
// work did, never longer than IMPORT_PAUSE_MAX_MS.

import { expect } from 'chai'
import { IMPORT_LIVE_LOOP_SHARE, IMPORT_PAUSE_LIVE_FACTOR, IMPORT_PAUSE_MAX_MS, importPauseMs } from '../../src/jobs/import-jobs.js'

describe('import pacing: the pause after a step', () => {
  it('idles as long as the step took while the event loop has nothing else to do', () => {
    expect(importPauseMs(12, 0)).to.equal(12)
    expect(importPauseMs(12, IMPORT_LIVE_LOOP_SHARE / 2)).to.equal(12)
  })

  it('leaves live work three quarters of the loop once it was there in the last pause', () => {
    expect(IMPORT_PAUSE_LIVE_FACTOR).to.equal(3)
    expect(importPauseMs(12, IMPORT_LIVE_LOOP_SHARE)).to.equal(36)
    expect(importPauseMs(12, 0.9)).to.equal(36)
  })

  it('never pauses longer than IMPORT_PAUSE_MAX_MS, however long a step took', () => {
    expect(importPauseMs(IMPORT_PAUSE_MAX_MS, 0)).to.equal(IMPORT_PAUSE_MAX_MS)
    expect(importPauseMs(50, 1)).to.equal(IMPORT_PAUSE_MAX_MS)
  })
})
