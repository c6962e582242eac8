// `npm run soak` (= build if stale, then node --import tsx bench/soak.ts): a long run of mixed load
// against a real Beacon process, to see memory and event-loop delay hold steady. Not part of CI.
//
// One Beacon (the built dist/src/main.js, a fresh LMDB folder in a temp dir, segment sweeps every
// second) and, in this process, a webhook receiver (node:http, answering 1 % of requests 503 so
// retries run too) and a load generator at a steady rate over a pool of visitors: page and product
// views, purchases (some with a repeated orderId), attribute and segment updates, profile links and
// reads.
//
// The pool churns, as a site's audience does: each visitor slot gets a new visitor after
// SOAK_VISITOR_MINUTES on average, each known person slot a new person after SOAK_PROFILE_MINUTES.
// So the load is stationary: what Beacon holds for the visitors in play (recent SKUs, order ids,
// window buckets, a profile's devices: each bounded) stops growing within a lifetime, and memory that
// still grows after the warm-up is Beacon's, not the workload's. (A fixed pool is not stationary: its
// visitors' histories fill towards their caps for hours. The 60-minute run of 2026-11-24 grew 62 % that
// way; heap snapshots put all of the growth in those per-visitor lists, bench/results/2026-11-25-soak.md.) Computed segments with 1-minute windows make visitors enter and leave all the time, by events
// and by the sweep; an event webhook (purchases) and an audience webhook (every enter and exit) deliver
// to the receiver.
//
// Each minute it reads Beacon's resident set from /proc/<pid>/status, split into its process memory
// (RssAnon: heap, buffers, native allocations) and its file-backed pages (RssFile: mostly LMDB's
// memory-mapped database, which grows with the data and which the kernel can drop at any time), the
// size of data.mdb, and from /metrics the event-loop delay p99 of that minute
// (nodejs_eventloop_lag_p99_seconds: prom-client resets its histogram at every scrape). The last line
// is the verdict:
//   SOAK PASS|FAIL memory growth after warm-up <g>% (≤ 10 %), loop delay p99 max <d> ms (≤ 50 ms), 5xx <n>
// Memory growth compares the process memory (RssAnon) of the last sample with the first one after
// warm-up: a leak grows it; a database that grows moves RssFile, which is printed beside it. The line
// before the verdict gives the same growth over the means of the first and last five judged minutes,
// and the live objects' (beacon_heap_live_bytes): one minute's RssAnon moves by ±10 % with V8's sizing.
//
// Environment:
//   SOAK_MINUTES         length of the run (default 30)
//   SOAK_WARMUP_MINUTES  minutes not judged (default: a third of the run, at least 1)
//   SOAK_RATE            requests per second (default 300)
//   SOAK_VISITORS        visitors in the pool (default 20000)
//   SOAK_VISITOR_MINUTES a visitor's mean time in the pool (default 5)
//   SOAK_PROFILE_MINUTES a known person's mean time in the pool of 2,000 (default 10)
//   SOAK_VISITOR_RETENTION_DAYS  Beacon's BEACON_VISITOR_RETENTION_DAYS (default unset: visitors kept),
//                        e.g. 0.005 (7.2 min) to see data.mdb level off as churned visitors expire
//   SOAK_VISITOR_RETENTION_SWEEP_MS  Beacon's BEACON_VISITOR_RETENTION_SWEEP_MS (default 60000 with a retention)
//   SOAK_EVENT_RETENTION_DAYS  Beacon's BEACON_EVENT_RETENTION_DAYS (default unset: 30 days, so the retained
//                        log and the saved reports' columns grow through the whole run, by design); 0: no log
//   SOAK_NODE_ARGS       extra node flags for Beacon, e.g. "--heapsnapshot-signal=SIGUSR2" to take heap
//                        snapshots (kill -USR2 <pid>; written to the current folder) and compare them

import { spawn } from 'node:child_process'
import http from 'node:http'
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createHmac, randomUUID } from 'node:crypto'
import type { AddressInfo } from 'node:net'

const MINUTES = Number(process.env.SOAK_MINUTES ?? 30)
const WARMUP_MINUTES = Number(process.env.SOAK_WARMUP_MINUTES ?? Math.max(1, Math.round(MINUTES / 3)))
const RATE = Number(process.env.SOAK_RATE ?? 300)
const VISITORS = Number(process.env.SOAK_VISITORS ?? 20_000)
const VISITOR_MINUTES = Number(process.env.SOAK_VISITOR_MINUTES ?? 5)
const PROFILE_MINUTES = Number(process.env.SOAK_PROFILE_MINUTES ?? 10)
const PROFILES = 2000
const INFLIGHT_MAX = 256
const RSS_GROWTH_MAX = 0.10
const LOOP_P99_MAX_MS = 50
const ADMIN_KEY = 'soak-admin-key-0123456789'
const RETENTION_DAYS = process.env.SOAK_VISITOR_RETENTION_DAYS ?? ''
const RETENTION_SWEEP_MS = process.env.SOAK_VISITOR_RETENTION_SWEEP_MS ?? '60000'
const EVENT_RETENTION_DAYS = process.env.SOAK_EVENT_RETENTION_DAYS ?? ''
const MAIN = new URL('../dist/src/main.js', import.meta.url).pathname

for (const [name, value] of [['SOAK_MINUTES', MINUTES], ['SOAK_WARMUP_MINUTES', WARMUP_MINUTES], ['SOAK_RATE', RATE], ['SOAK_VISITORS', VISITORS], ['SOAK_VISITOR_MINUTES', VISITOR_MINUTES], ['SOAK_PROFILE_MINUTES', PROFILE_MINUTES]] as const) {
  if (!Number.isFinite(value) || value <= 0 || (name === 'SOAK_WARMUP_MINUTES' && value >= MINUTES)) {
    throw new Error(`${name}=${value}: expected a positive number${name === 'SOAK_WARMUP_MINUTES' ? ' below SOAK_MINUTES' : ''}`)
  }
}

// ---- the receiver ----

let received = 0
const receiver = http.createServer((req, res) => {
  req.resume()
  req.on('end', () => {
    received++
    res.writeHead(Math.random() < 0.01 ? 503 : 200, { 'content-length': '0', 'retry-after': '1' })
    res.end()
  })
})
receiver.listen(0, '127.0.0.1')
await new Promise(resolve => receiver.once('listening', resolve))
const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`

// ---- Beacon ----

const dataDir = mkdtempSync(join(tmpdir(), 'beacon-soak-'))
const NODE_ARGS = (process.env.SOAK_NODE_ARGS ?? '').split(/\s+/).filter(arg => arg !== '')
const child = spawn(process.execPath, [...NODE_ARGS, MAIN], {
  env: {
    // The caller's environment (LD_PRELOAD, MALLOC_CONF, …) without its BEACON_ settings: the run sets its own.
    ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('BEACON_'))),
    BEACON_HOST: '127.0.0.1', BEACON_PORT: '0', BEACON_DATA_DIR: dataDir, BEACON_ADMIN_KEY: ADMIN_KEY,
    BEACON_WEBHOOK_ALLOW_PRIVATE: 'true', BEACON_SEGMENT_SWEEP_MS: '1000', BEACON_LOG_LEVEL: 'info',
    ...(RETENTION_DAYS === '' ? {} : { BEACON_VISITOR_RETENTION_DAYS: RETENTION_DAYS, BEACON_VISITOR_RETENTION_SWEEP_MS: RETENTION_SWEEP_MS }),
    ...(EVENT_RETENTION_DAYS === '' ? {} : { BEACON_EVENT_RETENTION_DAYS: EVENT_RETENTION_DAYS }),
  },
  stdio: ['ignore', 'pipe', 'inherit'],
})
const retentionPasses: string[] = []
const port = await new Promise<number>((resolve, reject) => {
  let output = ''
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    // The `beacon started` line says the port; later lines are dropped (the log level is info for it),
    // but for the retention's passes (with SOAK_VISITOR_RETENTION_DAYS).
    if (output.length < 1 << 16) output += chunk
    for (const line of chunk.split('\n')) if (line.includes('"msg":"inactive anonymous visitors erased"')) retentionPasses.push(line)
    const match = /"port":(\d+),[^\n]*"msg":"beacon started"/.exec(output)
    if (match !== null) resolve(Number(match[1]))
  })
  child.once('exit', code => reject(new Error(`beacon exited with ${code}:\n${output}`)))
})
const base = `http://127.0.0.1:${port}`

async function call (method: string, path: string, body?: unknown, admin = false): Promise<{ status: number, body: any }> {
  const headers: Record<string, string> = { 'content-type': 'application/json' }
  if (admin) headers.authorization = `Bearer ${ADMIN_KEY}`
  const res = await fetch(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
  const text = await res.text()
  return { status: res.status, body: text === '' ? null : JSON.parse(text) as unknown }
}

async function setup (): Promise<{ account: string, token: string, identitySecret: string }> {
  const created = (await call('POST', '/admin/accounts', { name: 'soak' }, true)).body as { account: string, identitySecret: string }
  const account = created.account
  const token = (await call('POST', `/admin/accounts/${account}/tokens`, { name: 'soak', attributes: ['*'], access: 'read-write' }, true)).body.token as string
  const admin = (path: string, body: unknown) => call('PUT', `/admin/accounts/${account}${path}`, body, true)
  await admin('/segments/browsing', { rule: { fact: 'count', event: 'productView', within: '1m', op: 'gte', value: 2 } })
  await admin('/segments/spending', { rule: { fact: 'sum', event: 'purchase', field: 'orderTotal', within: '5m', op: 'gte', value: 100 } })
  await admin('/segments/vip', {})
  const delivery = { mode: 'async', timeoutMs: 2000, batchSize: 1 }
  await admin('/webhooks/orders', { name: 'orders', enabled: true, trigger: { kind: 'event', events: ['purchase'] }, request: { method: 'POST', url: `${receiverUrl}/orders`, payload: '{"order": {{event.orderId}}, "plan": {{attribute.plan}}}' }, delivery })
  await admin('/webhooks/audience', { name: 'audience', enabled: true, trigger: { kind: 'audience', segments: ['browsing', 'spending'], on: ['enter', 'exit'] }, request: { method: 'POST', url: `${receiverUrl}/audience` }, delivery: { ...delivery, batchSize: 50 } })
  return { account, token, identitySecret: created.identitySecret }
}

const { account, token, identitySecret } = await setup()
const visitors = Array.from({ length: VISITORS }, () => randomUUID())
let people = 0
const profiles = Array.from({ length: PROFILES }, () => `person-${++people}@example.com`)
const pick = <T>(list: readonly T[]): T => list[Math.floor(Math.random() * list.length)]!
let orders = 0

/** Replaces, on average, `perTick` random slots of the pool (fractions carried over). */
function churner<T> (pool: T[], minutes: number, next: () => T): () => void {
  const perTick = pool.length / (minutes * 600)
  let due = 0
  return () => {
    for (due += perTick; due >= 1; due--) pool[Math.floor(Math.random() * pool.length)] = next()
  }
}
const churnVisitors = churner(visitors, VISITOR_MINUTES, () => randomUUID())
const churnProfiles = churner(profiles, PROFILE_MINUTES, () => `person-${++people}@example.com`)

function nextRequest (): [string, unknown] {
  const visitorId = pick(visitors)
  const r = Math.random()
  const event = (fields: Record<string, unknown>): [string, unknown] => ['/campaigns/query', { account, visitorId, platform: 'web', ...fields }]
  if (r < 0.35) return event({ event: 'pageView', path: `/p/${Math.floor(Math.random() * 100)}` })
  if (r < 0.65) return event({ event: 'productView', sku: `SKU-${Math.floor(Math.random() * 500)}`, price: 20 })
  // One purchase in five repeats an earlier order id (a reload of the thank-you page).
  if (r < 0.75) return event({ event: 'purchase', orderId: `o-${Math.random() < 0.2 ? Math.max(0, orders - 1) : ++orders}`, orderTotal: 40 })
  if (r < 0.82) {
    // A profileId goes with its signature, as a site's backend makes it (verified identity, docs/sdk.md).
    const profileId = pick(profiles)
    return event({ event: 'pageView', profileId, profileIdSignature: createHmac('sha256', identitySecret).update(profileId).digest('hex') })
  }
  if (r < 0.9) return ['/visitors/attributes', { account, token, visitorId, attributes: { plan: pick(['free', 'pro', 'team']), score: Math.floor(Math.random() * 100) } }]
  if (r < 0.95) return ['/visitors/segments', { account, token, visitorId, assignees: Math.random() < 0.5 ? ['vip'] : [], removes: Math.random() < 0.5 ? [] : ['vip'] }]
  return ['/visitors/query', { account, token, visitorId }]
}

// ---- load and samples ----

const statuses = new Map<number, number>()
let inflight = 0
let sent = 0
let skipped = 0
const tick = setInterval(() => {
  churnVisitors()
  churnProfiles()
  for (let i = 0; i < RATE / 10; i++) {
    if (inflight >= INFLIGHT_MAX) {
      skipped++
      continue
    }
    const [path, body] = nextRequest()
    inflight++
    sent++
    fetch(base + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
      .then(async res => { await res.arrayBuffer(); return res.status }, () => 0)
      .then(status => {
        inflight--
        statuses.set(status, (statuses.get(status) ?? 0) + 1)
      })
  }
}, 100)

interface Sample { minute: number, anonMb: number, fileMb: number, heapMb: number, liveMb: number, actors: number, dataMb: number, loopP99Ms: number }
const samples: Sample[] = []

async function sample (minute: number): Promise<Sample> {
  const text = await (await fetch(`${base}/metrics`)).text()
  const metric = (name: string): number => Number(new RegExp(`^${name} ([0-9.e+-]+)$`, 'm').exec(text)?.[1] ?? NaN)
  const status = readFileSync(`/proc/${child.pid}/status`, 'utf8')
  const kib = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(status)?.[1] ?? NaN)
  return {
    minute,
    anonMb: kib('RssAnon') / 1024,
    fileMb: kib('RssFile') / 1024,
    heapMb: metric('nodejs_heap_size_total_bytes') / 2 ** 20,
    liveMb: metric('beacon_heap_live_bytes') / 2 ** 20,
    actors: metric('beacon_actors_resident'),
    dataMb: statSync(join(dataDir, 'data.mdb')).size / 2 ** 20,
    loopP99Ms: metric('nodejs_eventloop_lag_p99_seconds') * 1000,
  }
}

console.log(`soak: ${MINUTES} min (warm-up ${WARMUP_MINUTES}), ${RATE} req/s over ${VISITORS} visitors (each ~${VISITOR_MINUTES} min) and ${PROFILES} people (each ~${PROFILE_MINUTES} min), visitor retention ${RETENTION_DAYS === '' ? 'off' : `${RETENTION_DAYS} days`}, beacon pid ${child.pid}`)
await sample(0) // resets the loop-delay histogram: the first minute starts clean
for (let minute = 1; minute <= MINUTES; minute++) {
  await new Promise(resolve => setTimeout(resolve, 60_000))
  const s = await sample(minute)
  samples.push(s)
  const fails = [...statuses].filter(([status]) => status >= 500 || status === 0).reduce((n, [, count]) => n + count, 0)
  for (const line of retentionPasses.splice(0)) {
    const pass = JSON.parse(line) as { erased: number, deliveries: number }
    console.log(`retention pass: ${pass.erased} visitors erased, ${pass.deliveries} delivery records`)
  }
  console.log(`minute ${String(minute).padStart(3)}: memory ${s.anonMb.toFixed(1)} MB (JS heap ${s.heapMb.toFixed(1)} MB, live ${s.liveMb.toFixed(1)} MB; ${s.actors} actors) + file pages ${s.fileMb.toFixed(1)} MB (data.mdb ${s.dataMb.toFixed(0)} MB), loop p99 ${s.loopP99Ms.toFixed(1)} ms, sent ${sent}, skipped ${skipped}, 5xx/failed ${fails}, webhook requests ${received}${minute <= WARMUP_MINUTES ? ' (warm-up)' : ''}`)
}
clearInterval(tick)

// ---- verdict ----

const judged = samples.filter(s => s.minute > WARMUP_MINUTES)
const first = judged[0]!
const last = judged[judged.length - 1]!
const growth = (last.anonMb - first.anonMb) / first.anonMb
// The same over the means of the first and last five judged minutes (a minute's figure moves by ±10 %
// with the JS heap's sizing), and for the live objects alone: printed beside the verdict, not judged.
const mean = (values: number[]): number => values.reduce((sum, value) => sum + value, 0) / values.length
const span = Math.min(5, Math.floor(judged.length / 2))
const meanGrowth = span === 0 ? growth : mean(judged.slice(-span).map(s => s.anonMb)) / mean(judged.slice(0, span).map(s => s.anonMb)) - 1
const liveGrowth = span === 0 ? 0 : mean(judged.slice(-span).map(s => s.liveMb)) / mean(judged.slice(0, span).map(s => s.liveMb)) - 1
const loopMaxMs = Math.max(...judged.map(s => s.loopP99Ms))
const failures = [...statuses].filter(([status]) => status >= 500 || status === 0).reduce((n, [, count]) => n + count, 0)
console.log(`statuses: ${JSON.stringify(Object.fromEntries(statuses))}`)
child.kill('SIGTERM')
await new Promise(resolve => child.once('exit', resolve))
receiver.close()
rmSync(dataDir, { recursive: true, force: true })
const pass = growth <= RSS_GROWTH_MAX && loopMaxMs <= LOOP_P99_MAX_MS && failures === 0 && received > 0
console.log(`memory growth after warm-up over ${span}-minute means: ${(meanGrowth * 100).toFixed(1)}%, the live objects' ${(liveGrowth * 100).toFixed(1)}%`)
console.log(`SOAK ${pass ? 'PASS' : 'FAIL'} memory growth after warm-up ${(growth * 100).toFixed(1)}% (≤ ${RSS_GROWTH_MAX * 100} %), ` +
  `loop delay p99 max ${loopMaxMs.toFixed(1)} ms (≤ ${LOOP_P99_MAX_MS} ms), 5xx ${failures}, webhook requests ${received}`)
process.exit(pass ? 0 : 1)
