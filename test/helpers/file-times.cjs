// Root hooks (`.mocharc.cjs` requires this file): with BEACON_TEST_TIMES=<file> set, each test file's
// wall time, from its first hook to its last, is appended to <file> as one JSON line ({ file, ms, cpu,
// childCpu }): the measure behind `.mocharc.cjs`'s slowest-first order. `cpu` is the CPU seconds of the
// mocha worker that ran the file, `childCpu` those of the processes it started and reaped meanwhile
// (Beacon nodes, nats-servers, browsers: Linux's cutime and cstime). In parallel mode (`npm test`) root
// hooks run once per file, in the worker that runs it; a serial run is one line. Without the variable
// it does nothing.
const { appendFileSync, readFileSync } = require('node:fs')

const out = process.env.BEACON_TEST_TIMES
let started = 0
let startedCpu = [0, 0]

/** [own, reaped children's] CPU seconds of this process, from /proc/self/stat (clock ticks of 10 ms). */
function cpuSeconds () {
  try {
    const stat = readFileSync('/proc/self/stat', 'utf8')
    // After the name (in parentheses, and may hold any character): state is field 3, so utime..cstime
    // (fields 14–17) are at 11–14 here.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    const [utime, stime, cutime, cstime] = fields.slice(11, 15).map(Number)
    return [(utime + stime) / 100, (cutime + cstime) / 100]
  } catch {
    return [0, 0]
  }
}

exports.mochaHooks = out === undefined || out === ''
  ? {}
  : {
      beforeAll () {
        started = Date.now()
        startedCpu = cpuSeconds()
      },
      afterAll () {
        const file = this.test?.parent?.suites?.[0]?.file ?? 'unknown'
        const [cpu, childCpu] = cpuSeconds()
        appendFileSync(out, JSON.stringify({
          file: file.slice(file.indexOf('test/')),
          ms: Date.now() - started,
          cpu: Math.round((cpu - startedCpu[0]) * 10) / 10,
          childCpu: Math.round((childCpu - startedCpu[1]) * 10) / 10,
        }) + '\n')
      },
    }
