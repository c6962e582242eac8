#!/usr/bin/env node
// Entry point of `node dist/src/main.js` and `npm start`: start Beacon. The CLI (src/cli.ts) is the
// package's bin; its `beacon start` runs the same start().

import { runServer } from './start.js'

runServer()
