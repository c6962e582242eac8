// Root hooks (`.mocharc.cjs` requires this file): with BEACON_TEST_TIMES=<file> set, each test file's
// wall time, from its first hook to its last, is appended to <file> as one JSON line ({ file, ms }):
// the measure behind `.mocharc.cjs`'s slowest-first order. In parallel mode (`npm test`) root hooks run
// once per file, in the worker that runs it; a serial run is one line. Without the variable it does nothing.
const { appendFileSync } = require('node:fs')

const out = process.env.BEACON_TEST_TIMES
let started = 0

exports.mochaHooks = out === undefined || out === ''
  ? {}
  : {
      beforeAll () { started = Date.now() },
      afterAll () {
        const file = this.test?.parent?.suites?.[0]?.file ?? 'unknown'
        appendFileSync(out, JSON.stringify({ file: file.slice(file.indexOf('test/')), ms: Date.now() - started }) + '\n')
      },
    }
