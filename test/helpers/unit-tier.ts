// Loaded first by `npm run test:unit` (test/unit.mocharc.cjs): the in-process tier starts no child
// process (no built server, nats-server, chromium or nginx), so any attempt fails the test that makes
// it, naming the call. A file that needs one belongs to the full suite only.

import childProcess from 'node:child_process'
import { syncBuiltinESMExports } from 'node:module'

const CALLS = ['spawn', 'spawnSync', 'exec', 'execSync', 'execFile', 'execFileSync', 'fork'] as const

for (const name of CALLS) {
  Object.defineProperty(childProcess, name, {
    configurable: true,
    writable: true,
    value: (command: unknown) => {
      throw new Error(`the unit tier starts no child process (child_process.${name}(${JSON.stringify(command)})): take this file out of test/unit.mocharc.cjs's list (npm test runs it)`)
    },
  })
}
// The named ESM exports (import { spawn } from 'node:child_process') follow the patched module.
syncBuiltinESMExports()
