#!/usr/bin/env node
// Entry point of `node dist/src/main.js` and `npm start`: start Beacon. The CLI (src/cli.ts) is the
// package's bin; its `beacon start` runs the same start().

import { start } from './start.js'
import { log } from './log.js'

start().catch((error: unknown) => {
  log.fatal({ err: error }, 'beacon failed to start')
  process.exit(1)
})
