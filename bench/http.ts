// `npm run bench:http`: wrk against a bare uWebSockets.js handler (the baseline) and against Beacon's
// public endpoints, same connections and duration, in one run. Prints req/s, p50/p99 latency, the
// ratio of each to the baseline, whether the targets are met, and BENCH_JSON=<results> for tooling.
//
// It builds nothing: run `npm run build` first (the npm script does). Every scenario gets its own
// fresh server process (and, for Beacon, a fresh LMDB folder), a setup step through the admin API,
// a warm-up run that also checks every response is 2xx, then the measured run. One server at a time:
// on a 2-core machine the server and wrk (1 thread) then have a core each, roughly.
//
// Environment:
//   BENCH_CONNECTIONS   wrk connections (default 64)
//   BENCH_DURATION_S    measured seconds per scenario (default 10)
//   BENCH_WARMUP_S      warm-up seconds per scenario (default 2)
//   BENCH_THREADS       wrk threads (default 1)
//   BENCH_VISITORS      distinct visitor ids the Lua scripts rotate over (default 10000)
//   BENCH_REPEAT        rounds of every scenario, interleaved; each reports its median round (default 1)
//   BENCH_ONLY          comma-separated scenario names (a comma followed by a space or a digit is part of a name) to run (the baseline always runs; optional
//                       diagnostic scenarios run only when named here)
//   BENCH_SERVER_NODE_ARGS  extra node flags for the server processes, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof"
//   BENCH_STRICT=1      exit 1 when a target is missed (failed scenarios always exit 1)
//   BENCH_WRK           the wrk binary (default wrk)

import { EVENT_KINDS, makeCampaigns, makeCatalog, mulberry32 } from './match-data.js'
import { BUILT_IN_EVENTS } from '../src/catalog/event-types.js'
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { cleanUpOnExit, cleanup, tempDirs, track } from './children.js'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const WRK_DIR = join(ROOT, 'bench', 'wrk')
const BEACON_MAIN = join(ROOT, 'dist', 'src', 'main.js')
const BARE_SERVER = join(ROOT, 'bench', 'bare-server.ts')
const ADMIN_KEY = 'bench-admin-key-0123456789abcdef'
/** The bare server does not look at the account: any UUID makes the same body as Beacon's scenario. */
const BARE_ACCOUNT = '3f1c2d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f'

const CONNECTIONS = intEnv('BENCH_CONNECTIONS', 64)
const DURATION_S = intEnv('BENCH_DURATION_S', 10)
const WARMUP_S = intEnv('BENCH_WARMUP_S', 2)
const THREADS = intEnv('BENCH_THREADS', 1)
const WRK = process.env.BENCH_WRK || 'wrk'
const SERVER_NODE_ARGS = (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(/\s+/).filter(arg => arg !== '')
const REPEAT = intEnv('BENCH_REPEAT', 1)
const ONLY = (process.env.BENCH_ONLY ?? '').split(/,(?! |\d)/).map(name => name.trim()).filter(name => name !== '')

/** The targets of the issue: throughput relative to the baseline, and tail latency. */
const RATIO_TARGET = 0.5
const P99_TARGET_MS = 10
/** More than this many cores used by others (before or during a run) gets a warning. */
const BUSY_CORES = 0.25

// ---------------------------------------------------------------------------------------------
// Scenarios. To add one (an account with 1,000 campaigns, with 50 segments, metrics on vs off...),
// append a row: the server and its env, a setup that creates the configuration through the admin API
// and returns the variables the Lua script reads, the script, and which targets apply.

interface Scenario {
  name: string
  server: 'bare' | 'beacon'
  /** Extra environment of the server process (BEACON_* for Beacon). */
  env?: Record<string, string>
  /** Bare server only: also write each body to a fresh LMDB folder and answer once it is flushed. */
  durable?: boolean
  /** Creates configuration through the admin API; returns environment variables for the wrk script. */
  setup?: (server: Server) => Promise<Record<string, string>>
  /** A file in bench/wrk. */
  script: string
  /** Request path (the URL wrk is pointed at). */
  path: string
  /** Fixed environment variables for the wrk script. */
  params?: Record<string, string>
  /** The row every ratio is computed against (exactly one). */
  baseline?: boolean
  /** Not run by default: only when named in BENCH_ONLY (diagnostic variants). */
  optional?: boolean
  /** Targets: req/s at least this fraction of the baseline's; p99 below this many ms. */
  minRatio?: number
  maxP99Ms?: number
  /** Target: req/s at least `minOfReference` of the named scenario's (the cost of a feature); events/s when either carries several events a request. */
  reference?: string
  minOfReference?: number
  /** Events each request carries (a batch); default 1. */
  eventsPerRequest?: number
}

const SCENARIOS: Scenario[] = [
  {
    name: 'bare uWS (baseline)',
    server: 'bare',
    script: 'pageview.lua',
    path: '/campaigns/query',
    params: { BENCH_ACCOUNT: BARE_ACCOUNT },
    baseline: true,
  },
  // The ceiling the durability rule sets on this disk: the bare handler plus one LMDB write per
  // request, answered once it is flushed, and nothing else.
  {
    name: 'bare uWS + flushed LMDB write (ceiling)',
    server: 'bare',
    durable: true,
    script: 'pageview.lua',
    path: '/campaigns/query',
    params: { BENCH_ACCOUNT: BARE_ACCOUNT },
  },
  {
    name: '/campaigns/query pageView',
    server: 'beacon',
    setup: tenant,
    script: 'pageview.lua',
    path: '/campaigns/query',
    minRatio: RATIO_TARGET,
    maxP99Ms: P99_TARGET_MS,
    // Metrics are on by default: counting must cost at most 5% of the same load with them off.
    reference: '/campaigns/query pageView, metrics off',
    minOfReference: 0.95,
  },
  {
    name: '/campaigns/query pageView, metrics off',
    server: 'beacon',
    env: { BEACON_METRICS: 'false' },
    setup: tenant,
    script: 'pageview.lua',
    path: '/campaigns/query',
  },
  // Report counting (in memory on the event path, folded every BEACON_REPORT_FOLD_MS): at most 5% of
  // the same load without it. The pair differs only in BEACON_REPORTS (metrics off in both).
  {
    name: '/campaigns/query pageView, reports on (metrics off)',
    server: 'beacon',
    env: { BEACON_METRICS: 'false' },
    setup: tenant,
    script: 'pageview.lua',
    path: '/campaigns/query',
    reference: '/campaigns/query pageView, reports off (metrics off)',
    minOfReference: 0.95,
  },
  {
    name: '/campaigns/query pageView, reports off (metrics off)',
    server: 'beacon',
    env: { BEACON_METRICS: 'false', BEACON_REPORTS: 'false' },
    setup: tenant,
    script: 'pageview.lua',
    path: '/campaigns/query',
  },
  // The retained event log (one put per event in the state write's transaction, docs/event-log.md): at
  // most 10% of the same load without it. The pair differs only in BEACON_EVENT_RETENTION_DAYS (0: no log).
  {
    name: '/campaigns/query pageView, event log on (metrics off)',
    server: 'beacon',
    env: { BEACON_METRICS: 'false' },
    setup: tenant,
    script: 'pageview.lua',
    path: '/campaigns/query',
    reference: '/campaigns/query pageView, event log off (metrics off)',
    minOfReference: 0.9,
  },
  {
    name: '/campaigns/query pageView, event log off (metrics off)',
    server: 'beacon',
    env: { BEACON_METRICS: 'false', BEACON_EVENT_RETENTION_DAYS: '0' },
    setup: tenant,
    script: 'pageview.lua',
    path: '/campaigns/query',
  },
  {
    name: '/visitors/attributes',
    server: 'beacon',
    setup: tenant,
    script: 'attributes.lua',
    path: '/visitors/attributes',
    maxP99Ms: P99_TARGET_MS,
  },
  // The campaign engine's cost on the hot path: an account with 1,000 campaigns of the matching
  // benchmark's realistic mix (bench/match-data.ts).
  {
    name: '/campaigns/query pageView, 1,000 campaigns',
    server: 'beacon',
    setup: server => tenantWith(server, campaignsSetup(1000)),
    script: 'pageview.lua',
    path: '/campaigns/query',
    maxP99Ms: P99_TARGET_MS,
  },
  // Experiments (issue 29): the same account with every tenth campaign an experiment of two variants
  // and a purchase goal; assignment adds no store read and no allocation, so within 5 % of the above.
  {
    name: '/campaigns/query pageView, 1,000 campaigns, 100 experiments',
    server: 'beacon',
    setup: server => tenantWith(server, campaignsSetup(1000, 10)),
    script: 'pageview.lua',
    path: '/campaigns/query',
    maxP99Ms: P99_TARGET_MS,
    reference: '/campaigns/query pageView, 1,000 campaigns',
    minOfReference: 0.95,
  },
  // Real-time segments: 50 computed segments evaluated after every event (issue target: at most 30%
  // lower throughput than the same load without segments).
  {
    name: '/campaigns/query pageView, 50 segments',
    server: 'beacon',
    setup: server => tenantWith(server, segmentsSetup(50)),
    script: 'pageview.lua',
    path: '/campaigns/query',
    maxP99Ms: P99_TARGET_MS,
    reference: '/campaigns/query pageView',
    minOfReference: 0.7,
  },
  // Batch ingestion (issue 30): the same page views in batches of 100, at the same durability (each
  // batch answered once its events are flushed): at least 4x the events/s of one event a request.
  {
    name: '/events/batch, 100 pageViews a batch',
    server: 'beacon',
    setup: tenant,
    script: 'batch.lua',
    path: '/events/batch',
    params: { BENCH_BATCH_SIZE: '100' },
    eventsPerRequest: 100,
    reference: '/campaigns/query pageView',
    minOfReference: 4,
  },
  // Diagnostics: the batch row without the event log (what the log's append costs a batched event).
  {
    name: '/events/batch, 100 pageViews a batch, event log off',
    server: 'beacon',
    env: { BEACON_EVENT_RETENTION_DAYS: '0' },
    setup: tenant,
    script: 'batch.lua',
    path: '/events/batch',
    params: { BENCH_BATCH_SIZE: '100' },
    eventsPerRequest: 100,
    optional: true,
  },
  // Diagnostics (BENCH_ONLY='/campaigns/query pageView (committed)'): the same load when a write is
  // acknowledged at commit instead of after the OS reports the flush, to see what the fsync costs.
  {
    name: '/campaigns/query pageView (committed)',
    server: 'beacon',
    env: { BEACON_DURABILITY: 'committed' },
    setup: tenant,
    script: 'pageview.lua',
    path: '/campaigns/query',
    optional: true,
  },
  {
    name: '/visitors/attributes (committed)',
    server: 'beacon',
    env: { BEACON_DURABILITY: 'committed' },
    setup: tenant,
    script: 'attributes.lua',
    path: '/visitors/attributes',
    optional: true,
  },
]

/** A tenant, then more configuration through the admin API. */
async function tenantWith (server: Server, configure: (server: Server, account: string) => Promise<void>): Promise<Record<string, string>> {
  const vars = await tenant(server)
  await configure(server, vars.BENCH_ACCOUNT!)
  return vars
}

/** `count` campaigns of the matching benchmark's mix; every `experimentEvery`-th one an experiment (0: none). */
function campaignsSetup (count: number, experimentEvery = 0) {
  return async (server: Server, account: string): Promise<void> => {
    const campaigns = makeCampaigns(7, makeCatalog(mulberry32(7)), count).map((c, i) => experimentEvery === 0 || i % experimentEvery !== 0
      ? c
      : { id: c.id, def: { ...c.def, variants: [{ id: 'a', weight: 1 }, { id: 'b', weight: 1, content: { variant: 'b' } }], goals: [{ event: 'purchase', metric: 'conversion' as const, windowDays: 7 }] } })
    // The mix's custom event kinds (login, …) are defined first: a campaign may trigger only on known ones.
    for (const kind of Object.keys(EVENT_KINDS).filter(kind => !BUILT_IN_EVENTS.has(kind))) {
      await adminCall(server, 'PUT', `/admin/accounts/${account}/event-types/${kind}`, { required: [] })
    }
    // Ten at a time: the admin API answers each once it is durable.
    for (let i = 0; i < campaigns.length; i += 10) {
      await Promise.all(campaigns.slice(i, i + 10).map(({ id, def }) => adminCall(server, 'PUT', `/admin/accounts/${account}/campaigns/${id}`, def)))
    }
  }
}

/** Segments of the shapes sites use: behaviour windows (with and without filters), spend, attributes. */
function segmentsSetup (count: number) {
  const kinds = ['pageView', 'productView', 'purchase']
  return async (server: Server, account: string): Promise<void> => {
    for (let i = 0; i < count; i++) {
      const event = kinds[i % kinds.length]!
      const rule = i % 5 === 0
        ? { fact: 'sum', event: 'purchase', field: 'orderTotal', within: `${1 + (i % 30)}d`, op: 'gte', value: 100 + i }
        : i % 5 === 1
          ? { all: [{ fact: 'count', event, within: `${1 + (i % 24)}h`, op: 'gte', value: 2 + (i % 4) }, { fact: 'attribute.plan', op: 'eq', value: 'pro' }] }
          : i % 5 === 2
            ? { fact: 'count', event: 'pageView', where: { fact: 'event.path', op: 'startsWith', value: `/products/${i % 10}` }, within: '7d', op: 'gte', value: 3 }
            : { fact: 'count', event, within: `${1 + (i % 7)}d`, op: 'gte', value: 1 + (i % 10) }
      await adminCall(server, 'PUT', `/admin/accounts/${account}/segments/seg-${i}`, { rule })
    }
  }
}

/** An account and a read-write token for every attribute: BENCH_ACCOUNT, BENCH_TOKEN. */
async function tenant (server: Server): Promise<Record<string, string>> {
  const created = await adminCall(server, 'POST', '/admin/accounts', { name: 'Bench site' })
  const account = created.account as string
  const token = await adminCall(server, 'POST', `/admin/accounts/${account}/tokens`, { name: 'bench', attributes: ['*'], access: 'read-write' })
  return { BENCH_ACCOUNT: account, BENCH_TOKEN: token.token as string }
}

// ---------------------------------------------------------------------------------------------
// Child processes: every one is killed when this process exits, however it exits.

cleanUpOnExit('bench:http')

interface Server {
  kind: Scenario['server']
  url: string
  pid: number
  output: () => string
  /** SIGTERM (graceful: a --cpu-prof profile gets written), SIGKILL after 10 s. */
  stop: () => Promise<void>
}

async function startServer (scenario: Scenario): Promise<Server> {
  const base = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...scenario.env }
  let child: ChildProcess
  let portPattern: RegExp
  let dataDir: string | null = null
  if (scenario.server === 'bare') {
    const env: Record<string, string> = { ...base, BENCH_BARE_HOST: '127.0.0.1', BENCH_BARE_PORT: '0' }
    if (scenario.durable === true) {
      dataDir = mkdtempSync(join(tmpdir(), 'beacon-bench-bare-'))
      tempDirs.add(dataDir)
      env.BENCH_BARE_DATA_DIR = dataDir
    }
    child = spawn(process.execPath, [...SERVER_NODE_ARGS, '--import', 'tsx', BARE_SERVER], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] })
    portPattern = /^\{"port":(\d+)\}$/m
  } else {
    dataDir = mkdtempSync(join(tmpdir(), 'beacon-bench-'))
    tempDirs.add(dataDir)
    child = spawn(process.execPath, [...SERVER_NODE_ARGS, BEACON_MAIN], {
      cwd: ROOT,
      env: {
        ...base,
        BEACON_HOST: '127.0.0.1',
        BEACON_PORT: '0',
        BEACON_DATA_DIR: dataDir,
        BEACON_ADMIN_KEY: ADMIN_KEY,
        BEACON_LOG_LEVEL: 'info',
        ...scenario.env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    portPattern = /"port":(\d+),[^\n]*"msg":"beacon started"/
  }
  track(child)
  let output = ''
  const append = (chunk: string): void => { output = (output + chunk).slice(-64 * 1024) }
  child.stdout!.setEncoding('utf8').on('data', append)
  child.stderr!.setEncoding('utf8').on('data', append)
  const exited = new Promise<void>(resolve => child.once('exit', () => resolve()))
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${scenario.server} server did not start within 15 s:\n${output}`)), 15_000)
    const onData = (): void => {
      const match = portPattern.exec(output)
      if (match === null) return
      clearTimeout(timer)
      child.stdout!.off('data', onData)
      resolve(Number(match[1]))
    }
    child.stdout!.on('data', onData)
    child.once('exit', code => { clearTimeout(timer); reject(new Error(`${scenario.server} server exited with ${code} before starting:\n${output}`)) })
  })
  return {
    kind: scenario.server,
    url: `http://127.0.0.1:${port}`,
    pid: child.pid!,
    output: () => output,
    async stop () {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
      const timer = setTimeout(() => {
        process.stderr.write(`warning: the ${scenario.server} server did not stop within 10 s of SIGTERM; killed\n${output.slice(-2000)}\n`)
        child.kill('SIGKILL')
      }, 10_000)
      await exited
      clearTimeout(timer)
      if (dataDir !== null) {
        rmSync(dataDir, { recursive: true, force: true })
        tempDirs.delete(dataDir)
      }
    },
  }
}

async function adminCall (server: Server, method: string, path: string, body?: unknown): Promise<any> {
  const headers: Record<string, string> = { authorization: `Bearer ${ADMIN_KEY}` }
  if (body !== undefined) headers['content-type'] = 'application/json'
  const res = await fetch(server.url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
  const text = await res.text()
  if (res.status < 200 || res.status > 299) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 500)}`)
  return text === '' ? null : JSON.parse(text)
}

// ---------------------------------------------------------------------------------------------
// wrk

interface WrkResult {
  requests: number
  duration_us: number
  bytes: number
  errors: { connect: number, read: number, write: number, status: number, timeout: number }
  latency_us: { min: number, mean: number, stdev: number, max: number, p50: number, p90: number, p99: number, p999: number }
  check: { responses: number, non2xx: number, sample: string | null } | null
}

interface CpuUse {
  /** Cores' worth of CPU used over a steady window of the run (1 = one core busy all the time). */
  server: number
  wrk: number
  /** Everything else on the machine, kernel I/O work (journal, block layer) included. */
  other: number
}

/**
 * Run wrk; when `sample` is set, measure the CPU of the server, of wrk and of the whole machine over
 * the run minus its first and last second, to show who had the cores (and whether something else did).
 */
async function runWrk (scenario: Scenario, server: Server, vars: Record<string, string>, seconds: number, check: boolean, sample = false): Promise<{ wrk: WrkResult, cpu: CpuUse | null }> {
  const args = ['-t', String(THREADS), '-c', String(CONNECTIONS), '-d', `${seconds}s`, '-s', join(WRK_DIR, scenario.script), server.url + scenario.path]
  const child = track(spawn(WRK, args, {
    cwd: ROOT,
    env: { ...process.env, ...scenario.params, ...vars, BENCH_WRK_DIR: WRK_DIR, BENCH_CHECK: check ? '1' : '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  }))
  let output = ''
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
  let cpu: CpuUse | null = null
  const timers: NodeJS.Timeout[] = []
  if (sample && child.pid !== undefined) {
    const pid = child.pid
    const [from, to] = seconds >= 3 ? [1, seconds - 1] : [0.2, seconds - 0.2]
    let first: CpuSnapshot | null = null
    timers.push(setTimeout(() => { first = cpuSnapshot(server.pid, pid) }, from * 1000))
    timers.push(setTimeout(() => {
      const last = cpuSnapshot(server.pid, pid)
      if (first === null || last === null) return
      const wall = (last.atMs - first.atMs) / 1000
      const serverCpu = (last.server - first.server) / wall
      const wrkCpu = (last.wrk - first.wrk) / wall
      cpu = { server: serverCpu, wrk: wrkCpu, other: Math.max(0, (last.machine - first.machine) / wall - serverCpu - wrkCpu) }
    }, to * 1000))
  }
  // 'close', not 'exit': wrk may end before its output has all been read.
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject)
    child.once('close', resolve)
  })
  for (const timer of timers) clearTimeout(timer)
  const line = /^BENCH_WRK_JSON (.*)$/m.exec(output)
  if (code !== 0 || line === null) throw new Error(`wrk ${args.join(' ')} exited with ${code}:\n${output}`)
  return { wrk: JSON.parse(line[1]!) as WrkResult, cpu }
}

interface CpuSnapshot { atMs: number, server: number, wrk: number, machine: number }

/** CPU seconds used so far by the server, by wrk and by the whole machine (Linux /proc; else null). */
function cpuSnapshot (serverPid: number, wrkPid: number): CpuSnapshot | null {
  const server = processCpu(serverPid)
  const wrk = processCpu(wrkPid)
  const machine = machineCpu()
  if (server === null || wrk === null || machine === null) return null
  return { atMs: performance.now(), server, wrk, machine }
}

/** utime + stime of a process (all its threads), in seconds. USER_HZ is 100 on Linux. */
function processCpu (pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return (Number(fields[11]) + Number(fields[12])) / 100
  } catch {
    return null
  }
}

/** Busy CPU seconds of the whole machine (all cores): everything but idle and iowait. */
function machineCpu (): number | null {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!
    const ticks = line.trim().split(/\s+/).slice(1).map(Number)
    // user nice system idle iowait irq softirq steal guest guest_nice (guest time is already in user)
    const busy = ticks[0]! + ticks[1]! + ticks[2]! + ticks[5]! + ticks[6]! + (ticks[7] ?? 0)
    return busy / 100
  } catch {
    return null
  }
}

/** How busy the machine is before a run, in cores (something else running skews every figure). */
async function machineLoad (ms = 1000): Promise<number | null> {
  const before = machineCpu()
  await new Promise(resolve => setTimeout(resolve, ms))
  const after = machineCpu()
  return before === null || after === null ? null : (after - before) / (ms / 1000)
}

// ---------------------------------------------------------------------------------------------
// The run

interface Result {
  name: string
  baseline: boolean
  server: Scenario['server']
  path: string
  connections: number
  durationS: number
  requests: number
  rps: number
  p50Ms: number
  p90Ms: number
  p99Ms: number
  p999Ms: number
  maxMs: number
  /** Cores' worth of CPU during the measured run (1 = one core busy): server, wrk, everything else. */
  cpu: CpuUse | null
  ratio: number | null
  errors: WrkResult['errors'] | null
  /** Non-2xx responses seen in the (fully checked) warm-up run. */
  warmupNon2xx: number | null
  failed: string | null
  targets: { name: string, met: boolean }[]
}

async function runScenario (scenario: Scenario): Promise<Result> {
  const result: Result = {
    name: scenario.name, baseline: scenario.baseline === true, server: scenario.server, path: scenario.path, connections: CONNECTIONS, durationS: DURATION_S,
    requests: 0, rps: 0, p50Ms: 0, p90Ms: 0, p99Ms: 0, p999Ms: 0, maxMs: 0, cpu: null, ratio: null,
    errors: null, warmupNon2xx: null, failed: null, targets: [],
  }
  const server = await startServer(scenario)
  try {
    const vars = scenario.setup === undefined ? {} : await scenario.setup(server)
    process.stderr.write(`  ${scenario.name}: warm-up ${WARMUP_S} s`)
    const { wrk: warm } = await runWrk(scenario, server, vars, WARMUP_S, true)
    result.warmupNon2xx = warm.check?.non2xx ?? null
    const warmErrors = socketErrors(warm)
    if (warm.check === null || warm.check.responses === 0 || warm.check.non2xx > 0 || warmErrors > 0) {
      result.failed = `warm-up: ${warm.check?.responses ?? 0} responses, ${warm.check?.non2xx ?? '?'} non-2xx, ${warmErrors} socket errors` +
        (warm.check?.sample ? `; first: ${warm.check.sample}` : '')
      process.stderr.write(' — FAILED\n')
      return result
    }
    process.stderr.write(`, measuring ${DURATION_S} s`)
    const { wrk: run, cpu } = await runWrk(scenario, server, vars, DURATION_S, false, true)
    const seconds = run.duration_us / 1e6
    Object.assign(result, {
      requests: run.requests,
      rps: run.requests / seconds,
      p50Ms: run.latency_us.p50 / 1000,
      p90Ms: run.latency_us.p90 / 1000,
      p99Ms: run.latency_us.p99 / 1000,
      p999Ms: run.latency_us.p999 / 1000,
      maxMs: run.latency_us.max / 1000,
      cpu,
      errors: run.errors,
    })
    const bad = socketErrors(run)
    if (run.errors.status > 0 || bad > 0) {
      result.failed = `${run.errors.status} responses with status >= 400, socket errors: connect ${run.errors.connect}, read ${run.errors.read}, ` +
        `write ${run.errors.write}, timeout ${run.errors.timeout}`
    } else if (run.requests === 0) {
      result.failed = 'no requests completed'
    }
    // The server's CPU per request beside the rate: on a shared machine it moves less than req/s does.
    const cpuUs = cpu === null ? '' : `, server CPU ${(cpu.server * 1e6 / result.rps).toFixed(1)} µs/req, others ${cpu.other.toFixed(2)} cores`
    process.stderr.write(result.failed === null ? ` — ${Math.round(result.rps)} req/s${cpuUs}\n` : ' — FAILED\n')
    return result
  } finally {
    await server.stop()
  }
}

function socketErrors (run: WrkResult): number {
  return run.errors.connect + run.errors.read + run.errors.write + run.errors.timeout
}

function judge (scenarios: Scenario[], results: Result[]): void {
  const baseline = results.find((_, i) => scenarios[i]!.baseline === true)
  results.forEach((result, i) => {
    const scenario = scenarios[i]!
    if (baseline !== undefined && baseline.failed === null && baseline.rps > 0 && result.failed === null) result.ratio = result.rps / baseline.rps
    if (result.failed !== null) return
    if (scenario.minRatio !== undefined) {
      result.targets.push({ name: `req/s >= ${scenario.minRatio}x baseline`, met: result.ratio !== null && result.ratio >= scenario.minRatio })
    }
    if (scenario.maxP99Ms !== undefined) {
      result.targets.push({ name: `p99 < ${scenario.maxP99Ms} ms`, met: result.p99Ms < scenario.maxP99Ms })
    }
    if (scenario.reference !== undefined && scenario.minOfReference !== undefined) {
      const at = results.findIndex(r => r.name === scenario.reference)
      const reference = results[at]
      const perRequest = scenario.eventsPerRequest ?? 1
      const referencePerRequest = scenarios[at]?.eventsPerRequest ?? 1
      const share = reference === undefined || reference.rps === 0 ? null : (result.rps * perRequest) / (reference.rps * referencePerRequest)
      const unit = perRequest === 1 && referencePerRequest === 1 ? 'req/s' : 'events/s'
      result.targets.push({
        name: `${unit} >= ${scenario.minOfReference}x "${scenario.reference}"${share === null ? ' (not run)' : ` (${share.toFixed(2)}x)`}`,
        met: share !== null && share >= scenario.minOfReference,
      })
    }
  })
}

function selected (scenario: Scenario): boolean {
  if (scenario.baseline === true) return true
  return ONLY.length === 0 ? scenario.optional !== true : ONLY.includes(scenario.name)
}

function table (results: Result[]): string {
  const rows = [['scenario', 'req/s', 'p50 ms', 'p99 ms', 'max ms', 'ratio', 'CPU server/wrk/other', 'errors', 'targets']]
  for (const r of results) {
    const failed = r.failed !== null
    rows.push([
      r.name,
      failed && r.requests === 0 ? '—' : Math.round(r.rps).toLocaleString('en-US'),
      failed && r.requests === 0 ? '—' : r.p50Ms.toFixed(2),
      failed && r.requests === 0 ? '—' : r.p99Ms.toFixed(2),
      failed && r.requests === 0 ? '—' : r.maxMs.toFixed(1),
      r.ratio === null ? '—' : r.ratio.toFixed(2) + 'x',
      r.cpu === null ? '—' : [r.cpu.server, r.cpu.wrk, r.cpu.other].map(c => `${Math.round(c * 100)}%`).join(' / '),
      failed ? 'FAILED' : 'none',
      failed ? '—' : r.baseline ? '(baseline)' : r.targets.length === 0 ? '—' : r.targets.map(t => `${t.met ? 'met' : 'MISSED'}: ${t.name}`).join('; '),
    ])
  }
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map(row => row[c]!.length)))
  const numeric = new Set([1, 2, 3, 4, 5, 6])
  const fmt = (row: string[]): string => '| ' + row.map((cell, c) => numeric.has(c) ? cell.padStart(widths[c]!) : cell.padEnd(widths[c]!)).join(' | ') + ' |'
  const rule = '|' + widths.map((w, c) => numeric.has(c) ? '-'.repeat(w + 1) + ':' : '-'.repeat(w + 2)).join('|') + '|'
  return [fmt(rows[0]!), rule, ...rows.slice(1).map(fmt)].join('\n')
}

async function wrkVersion (): Promise<string> {
  const child = track(spawn(WRK, ['-v'], { stdio: ['ignore', 'pipe', 'pipe'] }))
  let output = ''
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
  await new Promise<void>((resolve, reject) => {
    child.once('error', error => reject(new Error(`cannot run ${WRK} (${error.message}); install it (apt-get install wrk) or set BENCH_WRK`)))
    child.once('close', () => resolve())
  })
  return /^wrk \S+/m.exec(output)?.[0] ?? 'wrk (unknown version)'
}

async function main (): Promise<void> {
  const scenarios = SCENARIOS.filter(selected)
  const unknown = ONLY.filter(name => !SCENARIOS.some(s => s.name === name))
  if (unknown.length > 0) {
    throw new Error(`BENCH_ONLY: no scenario named ${unknown.map(n => JSON.stringify(n)).join(', ')}; ` +
      `known: ${SCENARIOS.map(s => JSON.stringify(s.name)).join(', ')}`)
  }
  const machine = `${cpus().length} cores (${cpus()[0]?.model.trim() ?? 'unknown CPU'}), Node ${process.version}, ${await wrkVersion()}`
  process.stderr.write(`bench:http — ${CONNECTIONS} connections, ${DURATION_S} s per scenario (+${WARMUP_S} s warm-up), ` +
    `wrk -t${THREADS}; ${machine}\n`)
  const loadBefore = await machineLoad()
  if (loadBefore !== null && loadBefore > BUSY_CORES) {
    process.stderr.write(`warning: the machine is already busy (${loadBefore.toFixed(2)} cores in use before the run): the figures will be low and noisy\n`)
  }

  // Rounds: every scenario once per round, so slow spells of the disk (the fsync sets the pace) fall on
  // all of them alike; each scenario reports its median round by req/s.
  const rounds: Result[][] = scenarios.map(() => [])
  for (let round = 1; round <= REPEAT; round++) {
    if (REPEAT > 1) process.stderr.write(`round ${round} of ${REPEAT}\n`)
    for (const [i, scenario] of scenarios.entries()) {
      try {
        rounds[i]!.push(await runScenario(scenario))
      } catch (error) {
        process.stderr.write(' — FAILED\n')
        rounds[i]!.push({
          name: scenario.name, baseline: scenario.baseline === true, server: scenario.server, path: scenario.path, connections: CONNECTIONS, durationS: DURATION_S,
          requests: 0, rps: 0, p50Ms: 0, p90Ms: 0, p99Ms: 0, p999Ms: 0, maxMs: 0, cpu: null, ratio: null,
          errors: null, warmupNon2xx: null, failed: error instanceof Error ? error.message : String(error), targets: [],
        })
      }
    }
  }
  const results = rounds.map(runs => runs.find(r => r.failed !== null) ?? [...runs].sort((a, b) => a.rps - b.rps)[runs.length >> 1]!)
  judge(scenarios, results)

  process.stdout.write('\n' + table(results) + '\n\n')
  for (const r of results) {
    if (r.failed !== null) process.stdout.write(`FAILED ${r.name}: ${r.failed}\n`)
  }
  for (const r of results) {
    if (r.cpu !== null && r.cpu.other > BUSY_CORES) {
      process.stdout.write(`warning: ${r.name}: ${Math.round(r.cpu.other * 100)}% of a core went to other processes and the kernel during the run; ` +
        'if that is not the server\'s own disk I/O, the machine was shared and this row is unreliable\n')
    }
  }
  const missed = results.flatMap(r => r.targets.filter(t => !t.met).map(t => `${r.name}: ${t.name} (${t.name.startsWith('p99') ? r.p99Ms.toFixed(2) + ' ms' : (r.ratio ?? 0).toFixed(2) + 'x'})`))
  const failed = results.filter(r => r.failed !== null)
  process.stdout.write(missed.length === 0 && failed.length === 0 ? 'All targets met.\n' : missed.map(m => `Target missed — ${m}\n`).join(''))
  process.stdout.write('BENCH_JSON=' + JSON.stringify({
    date: new Date().toISOString(), machine, loadBefore, connections: CONNECTIONS, durationS: DURATION_S, warmupS: WARMUP_S, threads: THREADS,
    results,
  }) + '\n')
  if (failed.length > 0 || (process.env.BENCH_STRICT === '1' && missed.length > 0)) process.exitCode = 1
}

function intEnv (name: string, fallback: number): number {
  const raw = process.env[name]
  if (raw === undefined || raw === '') return fallback
  const n = Number(raw)
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name}=${JSON.stringify(raw)}: expected a whole number >= 1`)
  return n
}

main().catch((error: unknown) => {
  process.stderr.write(`bench:http failed: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`)
  cleanup()
  process.exitCode = 1
})
