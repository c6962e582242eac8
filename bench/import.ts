// `npx tsx bench/import.ts`: a bulk import's speed and what it costs live traffic (issue 30, "Speed").
// One Beacon process (dist/: run `npm run build` first) on a fresh data folder; a generated NDJSON file
// of BENCH_IMPORT_ROWS historical events (pageView and purchase, over 60 days, 100 rows per visitor).
// Live traffic: wrk with bench/wrk/pageview.lua on /campaigns/query, BENCH_CONNECTIONS connections for
// BENCH_DURATION_S, measured once alone (the baseline) and once while the import runs, in the same run;
// first, the same load on the durability ceiling (bench/bare-server.ts with a data folder), whose p99
// is the floor of any server's that answers once a write is flushed, on this machine at this load.
// Prints the import's rows/s (upload answered to job done, and the upload alone), the p99 of the three
// runs, the target (live p99 during the import under 10 ms), and BENCH_JSON=<results>.
//
// Environment: BENCH_IMPORT_ROWS (default 1000000), BENCH_CONNECTIONS (default 8), BENCH_DURATION_S
// (default 10), BENCH_PAUSE_MS (each connection pauses this long after each answer: a live load below
// saturation; bench/wrk/common.lua), BENCH_WRK (default wrk). Diagnostics: BENCH_SERVER_NODE_ARGS (node flags for the Beacon
// process, e.g. '--trace-gc' or '--cpu-prof --cpu-prof-dir=/tmp/prof'), BENCH_SERVER_LOG (a file its
// standard output is appended to, where --trace-gc writes).

import { spawn } from 'node:child_process'
import { appendFileSync, createReadStream, createWriteStream, mkdtempSync, statSync } from 'node:fs'
import { once } from 'node:events'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { randomUUID } from 'node:crypto'
import { cleanUpOnExit, cleanup, tempDirs, track } from './children.js'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const BEACON_MAIN = join(ROOT, 'dist', 'src', 'main.js')
const WRK_DIR = join(ROOT, 'bench', 'wrk')
const ADMIN_KEY = 'bench-admin-key-0123456789abcdef'
const ROWS = intEnv('BENCH_IMPORT_ROWS', 1_000_000)
const CONNECTIONS = intEnv('BENCH_CONNECTIONS', 8)
const DURATION_S = intEnv('BENCH_DURATION_S', 10)
const WRK = process.env.BENCH_WRK || 'wrk'
const SERVER_NODE_ARGS = (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(arg => arg !== '')
const SERVER_LOG = process.env.BENCH_SERVER_LOG ?? ''
const DAY_MS = 86_400_000
/** The target for live requests while an import runs. */
const LIVE_P99_MAX_MS = 10

function intEnv (name: string, fallback: number): number {
  const raw = process.env[name]
  return raw === undefined || raw === '' ? fallback : Number(raw)
}

async function writeFile (path: string): Promise<void> {
  const out = createWriteStream(path)
  const nowMs = Date.now()
  let visitor = randomUUID()
  for (let i = 0; i < ROWS; i++) {
    if (i % 100 === 0) visitor = randomUUID()
    const atMs = nowMs - 60 * DAY_MS + Math.floor((i / ROWS) * 60 * DAY_MS)
    const row = i % 20 === 19
      ? { type: 'event', visitorId: visitor, platform: 'web', event: 'purchase', orderId: `o-${i}`, orderTotal: i % 200, timestamp: new Date(atMs).toISOString() }
      : { type: 'event', visitorId: visitor, platform: 'web', event: 'pageView', path: `/p/${i % 997}`, timestamp: new Date(atMs).toISOString() }
    if (!out.write(JSON.stringify(row) + '\n')) await once(out, 'drain')
  }
  out.end()
  await once(out, 'finish')
}

/**
 * The durability ceiling at the live load (bench/bare-server.ts with a data folder: uWS, one LMDB write
 * a request answered once flushed, nothing else): the least p99 any server that acknowledges a durable
 * write can show at this load on this machine, beside which the live p99 is read.
 */
async function ceiling (dataDir: string): Promise<WrkResult> {
  const child = track(spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'bench', 'bare-server.ts')], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', BENCH_BARE_HOST: '127.0.0.1', BENCH_BARE_PORT: '0', BENCH_BARE_DATA_DIR: dataDir },
    stdio: ['ignore', 'pipe', 'inherit'],
  }))
  let output = ''
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
  const deadline = Date.now() + 30_000
  let match: RegExpExecArray | null
  while ((match = /^\{"port":(\d+)\}$/m.exec(output)) === null) {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`the bare server did not start: ${output}`)
    await new Promise(resolve => setTimeout(resolve, 50))
  }
  try {
    return await wrk(`http://127.0.0.1:${match[1]}`, randomUUID())
  } finally {
    child.kill('SIGTERM')
    await once(child, 'exit')
  }
}

async function startServer (dataDir: string): Promise<string> {
  const child = track(spawn(process.execPath, [...SERVER_NODE_ARGS, BEACON_MAIN], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', BEACON_HOST: '127.0.0.1', BEACON_PORT: '0', BEACON_DATA_DIR: dataDir, BEACON_ADMIN_KEY: ADMIN_KEY, BEACON_LOG_LEVEL: 'info', BEACON_INFLIGHT_MAX: '100000' },
    stdio: ['ignore', 'pipe', 'pipe'],
  }))
  let output = ''
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk
    if (SERVER_LOG !== '') appendFileSync(SERVER_LOG, chunk)
  })
  const deadline = Date.now() + 60_000
  for (;;) {
    const match = /"port":(\d+),[^\n]*"msg":"beacon started"/.exec(output)
    if (match !== null) return `http://127.0.0.1:${match[1]}`
    if (Date.now() > deadline) throw new Error(`Beacon did not start:\n${output}`)
    await new Promise(resolve => setTimeout(resolve, 50))
  }
}

async function adminCall (base: string, method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(base + path, { method, headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) })
  const answer = await res.json()
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(answer)}`)
  return answer
}

interface WrkResult { requests: number, duration_us: number, non2xx: number, latency_us: { p50: number, p99: number } }

async function wrk (base: string, account: string): Promise<WrkResult> {
  const child = track(spawn(WRK, ['-t', '1', '-c', String(CONNECTIONS), '-d', `${DURATION_S}s`, '-s', join(WRK_DIR, 'pageview.lua'), `${base}/campaigns/query`], {
    env: { ...process.env, BENCH_ACCOUNT: account, BENCH_WRK_DIR: WRK_DIR, BENCH_CHECK: '0' }, stdio: ['ignore', 'pipe', 'pipe'],
  }))
  let output = ''
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
  // 'close', not 'exit': wrk may end before its output has all been read.
  const [code] = await once(child, 'close') as [number | null]
  const line = /^BENCH_WRK_JSON (.*)$/m.exec(output)
  if (code !== 0 || line === null) throw new Error(`wrk exited with ${code}: ${output}`)
  return JSON.parse(line[1]!) as WrkResult
}

const rpsOf = (run: WrkResult): number => Math.round(run.requests / (run.duration_us / 1e6))
const p99Of = (run: WrkResult): string => (run.latency_us.p99 / 1000).toFixed(2)

async function main (): Promise<void> {
  cleanUpOnExit('bench:import')
  const dir = mkdtempSync(join(tmpdir(), 'beacon-bench-import-'))
  tempDirs.add(dir)
  const file = join(dir, 'import.ndjson')
  await writeFile(file)
  const bytes = statSync(file).size
  console.log(`file: ${ROWS} rows, ${(bytes / 1048576).toFixed(1)} MiB`)
  const floor = await ceiling(join(dir, 'ceiling'))
  console.log(`durability ceiling (bare uWS + one flushed LMDB write a request, the same live load): ${rpsOf(floor)} req/s, p99 ${p99Of(floor)} ms`)
  const base = await startServer(join(dir, 'data'))
  const { account } = await adminCall(base, 'POST', '/admin/accounts', { name: 'bench' })
  const alone = await wrk(base, account)
  console.log(`live alone: ${rpsOf(alone)} req/s, p99 ${p99Of(alone)} ms`)
  const uploadStart = performance.now()
  const res = await fetch(`${base}/admin/accounts/${account}/imports`, {
    method: 'POST', headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/x-ndjson' }, body: createReadStream(file), duplex: 'half',
  } as unknown as RequestInit)
  const job = await res.json() as { id: string }
  if (res.status !== 202) throw new Error(`upload: ${res.status} ${JSON.stringify(job)}`)
  const uploadS = (performance.now() - uploadStart) / 1000
  const applyStart = performance.now()
  const during = await wrk(base, account)
  console.log(`live during the import: ${rpsOf(during)} req/s, p99 ${p99Of(during)} ms`)
  let state: { state: string, rowsRead: number, applied: number, duplicates: number, refused: number }
  for (;;) {
    state = await adminCall(base, 'GET', `/admin/accounts/${account}/imports/${job.id}`)
    if (state.state === 'done' || state.state === 'failed') break
    await new Promise(resolve => setTimeout(resolve, 500))
  }
  const applyS = (performance.now() - applyStart) / 1000
  const results = {
    rows: ROWS, bytes, uploadS, uploadMiBps: bytes / 1048576 / uploadS, applyS, rowsPerS: ROWS / applyS, state,
    ceiling: { rps: floor.requests / (floor.duration_us / 1e6), p99Ms: floor.latency_us.p99 / 1000, non2xx: floor.non2xx },
    liveAlone: { rps: alone.requests / (alone.duration_us / 1e6), p99Ms: alone.latency_us.p99 / 1000, non2xx: alone.non2xx },
    liveDuring: { rps: during.requests / (during.duration_us / 1e6), p99Ms: during.latency_us.p99 / 1000, non2xx: during.non2xx },
  }
  console.log(`import: upload ${uploadS.toFixed(1)} s (${results.uploadMiBps.toFixed(1)} MiB/s), applied in ${applyS.toFixed(1)} s: ${Math.round(results.rowsPerS)} rows/s, ${state.state}, ${state.applied} applied, ${state.refused} refused`)
  const met = results.liveDuring.p99Ms < LIVE_P99_MAX_MS
  console.log(`target: live p99 during the import < ${LIVE_P99_MAX_MS} ms: ${met ? 'met' : 'MISSED'} (${p99Of(during)} ms; the ceiling at this load ${p99Of(floor)} ms, the live load alone ${p99Of(alone)} ms)`)
  console.log(`BENCH_JSON=${JSON.stringify(results)}`)
}

main().then(() => cleanup(), (error: unknown) => {
  console.error(error)
  cleanup()
  process.exitCode = 1
})
