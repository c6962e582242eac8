// `npm run bench:cluster`: what cluster mode costs. The same wrk load as bench:http (pageView events on
// /campaigns/query, attribute writes on /visitors/attributes, over a pool of visitor ids: bench/wrk/)
// against (a) embedded mode, (b) one node in cluster mode on one nats-server (R1) and (c) three nodes on
// a 3-server NATS cluster (R3), wrk spreading the connections over the three; all in one run, throughput
// reported as ratios against (a). Two more rows on (c)'s NATS cluster split (c)'s cost: (b3) one node
// on it, before the two others start (what R3 adds), and (c2) the three nodes with each wrk sending only
// ids its node owns, as a partition-aware client would (what the forwarding hop adds: (c) runs after it
// over the same visitors, each wrk drawing from all of them), and (c2k), (c2) with an Idempotency-Key
// on every request (what the key costs, as beacon/client sends one); and the hop's
// transport alone, no Beacon on either side: NATS request/reply between two processes connected to two
// of the servers (bench/nats-hop.ts), as many in flight as (c) forwards; and the hop in isolation: one
// wrk with ids node-2 owns, sent to node-2, then to node-1 (every request forwarded), each node's CPU
// apart, with batched forwarding (the default) and again after node-1 restarted with
// BEACON_FORWARD_BATCH=false (src/cluster/forward-batch.ts): the hop's CPU per forwarded request both
// ways; and (n) the three nodes behind a real nginx running deploy/nginx-cluster.conf, each wrk sending
// the Beacon-Route hint its ids were answered with (a client keeping the hint: the SDK), nginx's CPU
// counted apart (target: Beacon + NATS <= 1.15x (c2)). For every row: the CPU per request of the Beacon processes and of the
// nats-server processes (/proc/<pid>/stat utime + stime before and after the measured run, divided by
// the requests), and the share of requests forwarded to their partition's owner
// (beacon_cluster_forwarded_total). A last row on (c) drives the three nodes with beacon/client
// (src/client) instead of wrk, each request sent to its owner from the route map. Then the takeover of one partition holding BENCH_TAKEOVER_VISITORS
// visitors: its owner SIGKILLed, timed from the kill until another node answers a read of one of them.
//
// It builds nothing: the npm script runs `npm run build` first. Real processes only: dist/src/main.js,
// /usr/sbin/nats-server (test/helpers/nats-server.ts, nats-cluster.ts), wrk. On a 2-core machine three
// nodes and three NATS servers share the two cores with wrk: three nodes cannot be faster here, which is
// why the CPU per request is the figure to read (docs/cluster.md turns it into a capacity model).
//
// Environment (like bench/http.ts):
//   BENCH_CONNECTIONS        wrk connections in all (default 48; split evenly over the nodes in (c))
//   BENCH_DURATION_S         measured seconds per row (default 10)
//   BENCH_PAUSE_MS           every connection (wrk's, the Node client's loops) pauses this long after each answer before
//                            its next request: rows at a load below saturation, so that CPU per request compares at
//                            about the same req/s (default 0: each connection sends as fast as it is answered)
//   BENCH_REPEAT             rounds of the rows compared on (c)'s cluster ((c2), (c2k), (c), (n), the Node client),
//                            interleaved, each round in another order; each row reports its median round (default 1)
//   BENCH_WARMUP_S           warm-up seconds per row, every response checked (default 3)
//   BENCH_VISITORS           distinct visitor ids the Lua scripts rotate over (default 10000)
//   BENCH_TAKEOVER_VISITORS  visitors written into the partition that is taken over (default 10000)
//   BENCH_LEASE_MS           BEACON_LEASE_MS of the cluster nodes (default 1500, as the cluster tests)
//   BENCH_ONLY               comma-separated phases among a,b,c,takeover (default all; c runs the b3, c, c2 and Node client rows;
//                            takeover runs on (c)'s cluster)
//   BENCH_STRICT=1           exit 1 when a target is missed (failures always exit 1)
//   BENCH_WRK                the wrk binary (default wrk)
//   BENCH_NATS_OLD           a second nats-server binary (e.g. /usr/sbin/nats-server, 2.9.10): the (b) and (c) phases
//                            run on each in turn (new, old, new, old...), and the rows are compared as ratios new/old.
//                            Nodes on an older server than cluster mode supports start with BEACON_NATS_ANY_VERSION.
//   BENCH_NODE_ARGS          extra node flags for the Beacon processes, e.g. '--cpu-prof --cpu-prof-dir=/tmp/prof'
//   BENCH_NODE_ENV           extra settings for the Beacon processes, 'NAME=value,NAME=value' (e.g. BEACON_EVENT_RETENTION_DAYS=0: no event log)

import { spawn, spawnSync } from 'node:child_process'
import { randomBytes, randomUUID } from 'node:crypto'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { partitionOf } from '../src/cluster/partition.js'
import { natsServerBin, startNatsServer } from '../test/helpers/nats-server.js'
import { startNatsCluster, type NatsCluster } from '../test/helpers/nats-cluster.js'
import { clusterNginxConf, startNginxWith } from '../test/helpers/nginx.js'
import { cleanUpOnExit, cleanup, tempDirs, track } from './children.js'
import { machineCpu, processCpu } from './proc-cpu.js'
import { BeaconClient } from '../src/client/index.js'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const WRK_DIR = join(ROOT, 'bench', 'wrk')
const BEACON_MAIN = join(ROOT, 'dist', 'src', 'main.js')
const ADMIN_KEY = 'bench-admin-key-0123456789abcdef'
const PARTITIONS = 64
/** Every node of a cluster needs the same secrets key (the node that takes a write seals, every node opens). */
const SECRETS_KEY = randomBytes(32).toString('base64')

const CONNECTIONS = intEnv('BENCH_CONNECTIONS', 48)
const DURATION_S = intEnv('BENCH_DURATION_S', 10)
const WARMUP_S = intEnv('BENCH_WARMUP_S', 3)
const VISITORS = intEnv('BENCH_VISITORS', 10_000)
const REPEAT = intEnv('BENCH_REPEAT', 1)
const PAUSE_MS = process.env.BENCH_PAUSE_MS === undefined || process.env.BENCH_PAUSE_MS === '' ? 0 : intEnv('BENCH_PAUSE_MS', 0)
const TAKEOVER_VISITORS = intEnv('BENCH_TAKEOVER_VISITORS', 10_000)
const LEASE_MS = intEnv('BENCH_LEASE_MS', 1500)
const WRK = process.env.BENCH_WRK || 'wrk'
/** The nats-server binaries the cluster phases run on: the default one, and BENCH_NATS_OLD's beside it. */
interface NatsRun { tag: 'new' | 'old', bin: string }
const NATS_RUNS: NatsRun[] = [
  { tag: 'new', bin: natsServerBin() },
  ...(process.env.BENCH_NATS_OLD !== undefined && process.env.BENCH_NATS_OLD !== '' ? [{ tag: 'old' as const, bin: process.env.BENCH_NATS_OLD }] : []),
]
/** The nats-server the phase under way runs on (set by main before each phase; (a) runs on none). */
let natsRun: NatsRun = NATS_RUNS[0]!
const NODE_ARGS = (process.env.BENCH_NODE_ARGS ?? '').split(/\s+/).filter(arg => arg !== '')
const NODE_ENV = Object.fromEntries((process.env.BENCH_NODE_ENV ?? '').split(',').filter(pair => pair.includes('=')).map(pair => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]))
const PHASES = ['a', 'b', 'c', 'takeover'] as const
const ONLY = (process.env.BENCH_ONLY ?? '').split(',').map(name => name.trim()).filter(name => name !== '')

/** Before (c): the nodes and NATS servers together below this many cores, for at most QUIET_WAIT_MS. */
const QUIET_CORES = 0.15
const QUIET_WAIT_MS = 180_000
/** How long the cluster may take to settle after a node restarted with batching off. */
const RESTART_SETTLE_MS = 300_000

/** The targets of issue 17. */
const CLUSTER_RATIO_TARGET = 0.5
const CPU_GROWTH_TARGET = 1.5
/** Issue 32: three nodes behind nginx with the route config, CPU per request against (c2). */
const ROUTED_TARGET = 1.15
const TAKEOVER_TARGET_MS = 2000
/** Issue 32: the Node client, owner-routed over three nodes, against wrk sent to the owner (c2). */
const NODE_CLIENT_TARGET = 1.1
/** The targets of issue 32 ("A cheaper hop"). */
const FORWARDED_TARGET = 1.4
const HOP_BATCH_TARGET = 0.5

const WORKLOADS = [
  { name: 'pageView', script: 'pageview.lua', path: '/campaigns/query' },
  { name: 'attributes', script: 'attributes.lua', path: '/visitors/attributes' },
] as const
type Workload = typeof WORKLOADS[number]

// ---------------------------------------------------------------------------------------------
// Child processes: every one is killed when this process exits, however it exits (nats-servers have
// their own hook in test/helpers/nats-server.ts).

cleanUpOnExit('bench:cluster')

interface Node {
  id: string
  url: string
  pid: number
  output: () => string
  kill: () => Promise<void>
  stop: () => Promise<void>
}

/** A Beacon process (dist/src/main.js) on a random port and a fresh data folder. */
async function startNode (id: string, env: Record<string, string>): Promise<Node> {
  const dataDir = mkdtempSync(join(tmpdir(), 'beacon-bench-cluster-'))
  tempDirs.add(dataDir)
  const child = track(spawn(process.execPath, [...NODE_ARGS, BEACON_MAIN], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '',
      BEACON_HOST: '127.0.0.1', BEACON_PORT: '0', BEACON_DATA_DIR: dataDir, BEACON_ADMIN_KEY: ADMIN_KEY, BEACON_LOG_LEVEL: 'info',
      ...NODE_ENV, ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  }))
  let output = ''
  // The takeover lines are looked for in the output: keep the last 256 KiB.
  const append = (chunk: string): void => { output = (output + chunk).slice(-256 * 1024) }
  child.stdout!.setEncoding('utf8').on('data', append)
  child.stderr!.setEncoding('utf8').on('data', append)
  const exited = new Promise<void>(resolve => child.once('exit', () => resolve()))
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${id} did not start within 60 s:\n${output.slice(-4000)}`)), 60_000)
    const onData = (): void => {
      const match = /"port":(\d+),[^\n]*"msg":"beacon started"/.exec(output)
      if (match === null) return
      clearTimeout(timer)
      child.stdout!.off('data', onData)
      resolve(Number(match[1]))
    }
    child.stdout!.on('data', onData)
    child.once('exit', code => { clearTimeout(timer); reject(new Error(`${id} exited with ${code} before starting:\n${output.slice(-4000)}`)) })
  })
  const signal = async (name: NodeJS.Signals): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill(name)
    await exited
  }
  return {
    id, url: `http://127.0.0.1:${port}`, pid: child.pid!, output: () => output,
    kill: () => signal('SIGKILL'),
    async stop () {
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000)
      await signal('SIGTERM')
      clearTimeout(timer)
    },
  }
}

async function call (url: string, method: string, path: string, body?: unknown, admin = true): Promise<{ status: number, body: any }> {
  const headers: Record<string, string> = {}
  if (admin) headers.authorization = `Bearer ${ADMIN_KEY}`
  if (body !== undefined) headers['content-type'] = 'application/json'
  const res = await fetch(url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
  const text = await res.text()
  let parsed: unknown = text
  try { parsed = text === '' ? null : JSON.parse(text) } catch { /* not JSON: keep the text (metrics) */ }
  return { status: res.status, body: parsed }
}

interface Tenant { account: string, token: string }

/** An account and a read-write token, created through `node`; resolves once every node serves them. */
async function createTenant (node: Node, all: Node[]): Promise<Tenant> {
  const created = await call(node.url, 'POST', '/admin/accounts', { name: 'Bench site' })
  if (created.status !== 201) throw new Error(`account creation: ${created.status} ${JSON.stringify(created.body)}`)
  const account = created.body.account as string
  const token = await call(node.url, 'POST', `/admin/accounts/${account}/tokens`, { name: 'bench', attributes: ['*'], access: 'read-write' })
  if (token.status !== 201) throw new Error(`token creation: ${token.status} ${JSON.stringify(token.body)}`)
  const tenant = { account, token: token.body.token as string }
  await served(tenant, all)
  return tenant
}

/** Resolves once every node serves the tenant (configuration reaches the nodes through the bucket). */
async function served (tenant: Tenant, all: Node[]): Promise<void> {
  const { account } = tenant
  const deadline = Date.now() + 15_000
  for (const other of all) {
    for (;;) {
      const answer = await call(other.url, 'POST', '/visitors/query', { account, token: tenant.token, visitorId: randomUUID() }, false)
      if (answer.status === 200) break
      if (Date.now() > deadline) throw new Error(`${other.id} does not serve the new account: ${answer.status} ${JSON.stringify(answer.body)}`)
      await sleep(50)
    }
  }
}

interface ClusterAnswer { joined: boolean, owned: number[], recovering: number[], unowned: number[], nodes: Array<{ id: string, partitions: number[] }> }

/** Resolves once every node has joined and is ready and the nodes own all partitions between them. */
async function settled (nodes: Node[], timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  let last = ''
  for (;;) {
    try {
      const answers = await Promise.all(nodes.map(async node => (await call(node.url, 'GET', '/admin/cluster')).body as ClusterAnswer))
      const ready = await Promise.all(nodes.map(async node => (await call(node.url, 'GET', '/readyz', undefined, false)).status))
      const owned = answers.reduce((sum, answer) => sum + answer.owned.length, 0)
      const busy = answers.some(answer => !answer.joined || answer.recovering.length > 0 || answer.unowned.length > 0)
      if (!busy && owned === PARTITIONS && ready.every(status => status === 200) && answers.every(answer => answer.owned.length > 0)) return
      last = `owned ${owned} of ${PARTITIONS}, readyz ${ready.join('/')}`
    } catch (error) {
      last = String(error)
    }
    if (Date.now() > deadline) {
      // Kept after the run (not a temp folder of the run's): what the nodes said, to find out why.
      const dir = mkdtempSync(join(tmpdir(), 'bench-cluster-unsettled-'))
      for (const node of nodes) writeFileSync(join(dir, `${node.id}.log`), node.output())
      throw new Error(`the cluster did not settle within ${timeoutMs} ms: ${last}; the nodes' last output is in ${dir}`)
    }
    await sleep(100)
  }
}

/** The value of a metric (summed over its labels) in a node's /metrics; 0 when absent. */
async function metric (node: Node, name: string): Promise<number> {
  const answer = await call(node.url, 'GET', '/metrics')
  if (answer.status !== 200) throw new Error(`${node.id} GET /metrics: ${answer.status}`)
  let sum = 0
  for (const line of String(answer.body).split('\n')) {
    const match = /^(\S+?)(?:\{[^}]*\})? (\S+)$/.exec(line)
    if (match !== null && match[1] === name) sum += Number(match[2])
  }
  return sum
}

async function metricSum (nodes: Node[], name: string): Promise<number> {
  return (await Promise.all(nodes.map(node => metric(node, name)))).reduce((a, b) => a + b, 0)
}

// ---------------------------------------------------------------------------------------------
// wrk and CPU

interface WrkResult {
  requests: number
  duration_us: number
  errors: { connect: number, read: number, write: number, status: number, timeout: number }
  latency_us: { p50: number, p99: number, max: number }
  check: { responses: number, non2xx: number, sample: string | null } | null
}

/**
 * One wrk process per node, the connections split evenly, all at once; `idFiles` and `via` as measure()'s
 * (`via`: wrk i sends to via[i].url with its header instead of to node i). `keyed`: an Idempotency-Key
 * on every request, new to the cluster (a fresh prefix per wrk process).
 */
async function runWrk (workload: Workload, nodes: Node[], tenant: Tenant, seconds: number, check: boolean, idFiles: string[] | null, via: Via[] | null = null, keyed = false): Promise<{ runs: WrkResult[] }> {
  const per = Math.max(1, Math.floor(CONNECTIONS / nodes.length))
  const runs = await Promise.all(nodes.map(async (node, i) => {
    const target = via?.[i] ?? null
    const args = ['-t', '1', '-c', String(per), '-d', `${seconds}s`, ...(target === null ? [] : ['-H', target.header]), '-s', join(WRK_DIR, workload.script), (target?.url ?? node.url) + workload.path]
    const child = track(spawn(WRK, args, {
      cwd: ROOT,
      env: {
        ...process.env, BENCH_WRK_DIR: WRK_DIR, BENCH_CHECK: check ? '1' : '0', BENCH_VISITORS: String(VISITORS),
        BENCH_ACCOUNT: tenant.account, BENCH_TOKEN: tenant.token, BENCH_THREAD_OFFSET: String(i * 101), BENCH_PAUSE_MS: String(PAUSE_MS),
        ...(idFiles === null ? {} : { BENCH_IDS_FILE: idFiles[i]! }),
        ...(keyed ? { BENCH_IDEMPOTENCY_PREFIX: randomUUID() } : {}),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    }))
    let output = ''
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
    // 'close', not 'exit': the process may end before its output has all been read.
    const code = await new Promise<number | null>((resolve, reject) => { child.once('error', reject); child.once('close', resolve) })
    const line = /^BENCH_WRK_JSON (.*)$/m.exec(output)
    if (code !== 0 || line === null) throw new Error(`wrk ${args.join(' ')} exited with ${code}:\n${output}`)
    return JSON.parse(line[1]!) as WrkResult
  }))
  return { runs }
}

/** cutime + cstime of this process: the CPU of its children that ended and were waited for, in seconds. */
function reapedChildrenCpu (): number {
  const stat = readFileSync('/proc/self/stat', 'utf8')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(fields[13]) + Number(fields[14])) / 100
}

const sumCpu = (pids: number[]): number => pids.reduce((sum, pid) => sum + processCpu(pid), 0)

// ---------------------------------------------------------------------------------------------
// The rows

interface Row {
  phase: keyof typeof LABELS
  label: string
  workload: Workload['name']
  requests: number
  rps: number
  p50Ms: number
  p99Ms: number
  /** CPU microseconds per request. */
  beaconUs: number
  natsUs: number
  /** Cores' worth of CPU over the run: wrk, and everything else on the machine. */
  wrkCores: number
  otherCores: number
  forwardedShare: number | null
  /** Forwarded requests per batch (one NATS message to one node: beacon_cluster_forward_batches_total); null when none was sent in one. */
  perBatch: number | null
  /** CPU microseconds per request of the proxy in front ((n): nginx); null without one. */
  proxyUs: number | null
  failed: string | null
  /** The nats-server it ran on: 'new' (the default binary) or 'old' (BENCH_NATS_OLD); 'new' for (a). */
  nats: NatsRun['tag']
  /** Its round (BENCH_REPEAT), from 1. */
  round: number
}

const LABELS = {
  a: '(a) embedded, 1 process',
  b: '(b) cluster, 1 node, 1 NATS (R1)',
  // Decomposition rows, measured on (c)'s NATS cluster: one node on it (what R3 costs), and three nodes
  // with each wrk sending only the keys its node owns (what the forwarding hop costs).
  b3: '(b3) cluster, 1 node, 3 NATS (R3)',
  c: '(c) cluster, 3 nodes, 3 NATS (R3)',
  c2: '(c2) 3 nodes, R3, sent to the owner',
  // (c2) with an Idempotency-Key on every request, as beacon/client sends: what the key itself costs.
  c2k: '(c2k) sent to the owner, with keys',
  n: '(n) 3 nodes, R3, nginx + route config',
  // The same three nodes driven by beacon/client (src/client) instead of wrk: owner-routed from the route
  // map, an Idempotency-Key on every write (wrk sends none); its own CPU is in the wrk column.
  cn: 'Node client, owner-routed, three nodes',
  // (c) again once every node runs with BEACON_FORWARD_BATCH=false: what batching changes in (c).
  cOff: '(c) 3 nodes, R3, batching off',
}

/** A proxy in front of the nodes: wrk i sends to `url` with `header` (`Name: value`). */
interface Via { url: string, header: string }

/** What makes the load of a row: `seconds` of it (every answer checked when `check`), and the CPU seconds it took itself. */
type Load = (seconds: number, check: boolean) => Promise<{ runs: WrkResult[], cpuS: number }>

/**
 * `idFiles`: per node, a file of the visitor ids its wrk sends (default: every wrk the whole pool).
 * `proxy`: wrk sends through it (via), and its process's CPU is counted apart (proxyUs).
 * `driver`: the load (default wrk).
 */
async function measure (phase: Row['phase'], workload: Workload, nodes: Node[], nats: number[], tenant: Tenant, idFiles: string[] | null = null, proxy: { pid: number, via: Via[] } | null = null, driver: Load | null = null): Promise<Row> {
  const via = proxy?.via ?? null
  const load: Load = driver ?? (async (seconds, check) => {
    // wrk's CPU: the only children of this process that end during the run.
    const reapedBefore = reapedChildrenCpu()
    const { runs } = await runWrk(workload, nodes, tenant, seconds, check, idFiles, via, phase === 'c2k')
    return { runs, cpuS: reapedChildrenCpu() - reapedBefore }
  })
  const row: Row = {
    phase, label: phase !== 'a' && natsRun.tag === 'old' ? `${LABELS[phase]} [old NATS]` : LABELS[phase], workload: workload.name, requests: 0, rps: 0, p50Ms: 0, p99Ms: 0,
    beaconUs: 0, natsUs: 0, wrkCores: 0, otherCores: 0, forwardedShare: null, perBatch: null, proxyUs: null, failed: null, nats: phase === 'a' ? 'new' : natsRun.tag, round: 1,
  }
  process.stderr.write(`  ${row.label} ${workload.name}: warm-up ${WARMUP_S} s`)
  const warm = await load(WARMUP_S, true)
  const checked = warm.runs.reduce((sum, run) => sum + (run.check?.responses ?? 0), 0)
  const bad = warm.runs.reduce((sum, run) => sum + (run.check?.non2xx ?? 0) + socketErrors(run), 0)
  if (checked === 0 || bad > 0) {
    row.failed = `warm-up: ${checked} responses, ${bad} non-2xx or socket errors; first: ${warm.runs.find(run => run.check?.sample)?.check?.sample ?? '—'}`
    process.stderr.write(' — FAILED\n')
    return row
  }
  process.stderr.write(`, measuring ${DURATION_S} s`)
  const clustered = phase !== 'a'
  const forwardedBefore = clustered ? await metricSum(nodes, 'beacon_cluster_forwarded_total') : 0
  const batchesBefore = clustered ? await metricSum(nodes, 'beacon_cluster_forward_batches_total') : 0
  const beaconPids = nodes.map(node => node.pid)
  const proxyPids = proxy === null ? [] : [proxy.pid]
  const before = { beacon: sumCpu(beaconPids), nats: sumCpu(nats), proxy: sumCpu(proxyPids), machine: machineCpu(), at: performance.now() }
  const { runs, cpuS: wrkCpu } = await load(DURATION_S, false)
  const after = { beacon: sumCpu(beaconPids), nats: sumCpu(nats), proxy: sumCpu(proxyPids), machine: machineCpu(), at: performance.now() }
  const forwardedAfter = clustered ? await metricSum(nodes, 'beacon_cluster_forwarded_total') : 0
  const batches = clustered ? await metricSum(nodes, 'beacon_cluster_forward_batches_total') - batchesBefore : 0
  const requests = runs.reduce((sum, run) => sum + run.requests, 0)
  const seconds = Math.max(...runs.map(run => run.duration_us)) / 1e6
  const wall = (after.at - before.at) / 1000
  Object.assign(row, {
    requests,
    rps: requests / seconds,
    p50Ms: Math.max(...runs.map(run => run.latency_us.p50)) / 1000,
    p99Ms: Math.max(...runs.map(run => run.latency_us.p99)) / 1000,
    beaconUs: requests === 0 ? 0 : (after.beacon - before.beacon) / requests * 1e6,
    natsUs: requests === 0 ? 0 : (after.nats - before.nats) / requests * 1e6,
    wrkCores: wrkCpu / wall,
    proxyUs: proxy === null || requests === 0 ? null : (after.proxy - before.proxy) / requests * 1e6,
    otherCores: Math.max(0, (after.machine - before.machine - (after.beacon - before.beacon) - (after.nats - before.nats) - (after.proxy - before.proxy) - wrkCpu) / wall),
    forwardedShare: clustered && requests > 0 ? (forwardedAfter - forwardedBefore) / requests : null,
    perBatch: batches > 0 ? (forwardedAfter - forwardedBefore) / batches : null,
  })
  const status = runs.reduce((sum, run) => sum + run.errors.status, 0)
  const sockets = runs.reduce((sum, run) => sum + socketErrors(run), 0)
  if (status > 0 || sockets > 0) row.failed = `${status} responses with status >= 400, ${sockets} socket errors`
  else if (requests === 0) row.failed = 'no requests completed'
  process.stderr.write(row.failed === null ? ` — ${Math.round(row.rps)} req/s\n` : ` — FAILED (${row.failed})\n`)
  return row
}

function socketErrors (run: WrkResult): number {
  return run.errors.connect + run.errors.read + run.errors.write + run.errors.timeout
}

// ---------------------------------------------------------------------------------------------
// Phases

function clusterEnv (name: string, urls: string[], replicas: number, id: string): Record<string, string> {
  return {
    BEACON_CLUSTER: name, BEACON_NATS_URL: urls.join(','), BEACON_NODE_ID: id, BEACON_REPLICAS: String(replicas),
    BEACON_LEASE_MS: String(LEASE_MS), BEACON_PARTITIONS: String(PARTITIONS), BEACON_SECRETS_KEY: SECRETS_KEY,
    ...(natsRun.tag === 'old' ? { BEACON_NATS_ANY_VERSION: 'true' } : {}),
  }
}

async function phaseEmbedded (rows: Row[]): Promise<void> {
  const node = await startNode('embedded', {})
  try {
    const tenant = await createTenant(node, [node])
    for (const workload of WORKLOADS) rows.push(await measure('a', workload, [node], [], tenant))
  } finally {
    await node.stop()
  }
}

async function phaseOneNode (rows: Row[]): Promise<void> {
  const nats = await startNatsServer({ bin: natsRun.bin })
  let node: Node | null = null
  try {
    node = await startNode('node-1', clusterEnv('bench1', [nats.url], 1, 'node-1'))
    await settled([node])
    const tenant = await createTenant(node, [node])
    for (const workload of WORKLOADS) rows.push(await measure('b', workload, [node], [nats.pid!], tenant))
  } finally {
    await node?.stop()
    await nats.close()
  }
}

interface Takeover {
  partition: number
  visitors: number
  writeRps: number
  /** Changelog entries of the partition since its last snapshot, as its owner reported before the kill. */
  changelogEntries: number | null
  /** From the SIGKILL until a read of one of its visitors through another node was answered 200. */
  killToServedMs: number
  /** Reads answered 503 while polling (each waits up to the forwarder's 5 s budget first). */
  refusedPolls: number
  /** Reads answered 200 without the acknowledged write (must be 0: an acknowledged write missing). */
  emptyReads: number
  /** The new owner's own account (log line `partition taken over`): lease seen gone → recovered. */
  takeoverMs: number | null
  recoveryMs: number | null
  /** Every takeover after this kill, by beacon_cluster_takeover_seconds on the survivors: count and mean. */
  takeovers: number
  meanTakeoverMs: number | null
  /** Visitors of the partition read back with their last attributes after the takeover. */
  readBack: number
  wrong: number
}

/**
 * Waits until the processes use less than QUIET_CORES together over a second (at most QUIET_WAIT_MS),
 * saying how long it took.
 */
async function quiet (pids: number[]): Promise<void> {
  const startedAt = performance.now()
  process.stderr.write('  waiting for the cluster to go quiet after the joins')
  for (;;) {
    const before = sumCpu(pids)
    await sleep(1000)
    const cores = sumCpu(pids) - before
    const waitedS = (performance.now() - startedAt) / 1000
    if (cores < QUIET_CORES || waitedS * 1000 >= QUIET_WAIT_MS) {
      process.stderr.write(`: ${waitedS.toFixed(0)} s (${cores.toFixed(2)} cores in use)\n`)
      return
    }
  }
}

/** One wrk with ids node-2 owns, sent to `via`: requests, and CPU µs per request of each node and of NATS. */
interface HopRun { label: string, workload: string, batch: boolean, rps: number, nodeUs: number[], natsUs: number }

/**
 * The forwarding hop without the contention of (c): one wrk (all of BENCH_CONNECTIONS) whose ids node-2
 * owns, sent to node-2 (no hop), then to node-1 (every request forwarded to node-2). Each node's CPU is
 * counted apart: node-1's is the receiving side of the hop, node-2's rise the owner's side.
 */
async function measureIsolatedHop (nodes: Node[], natsPids: number[], tenant: Tenant, idFiles: string[], batch: boolean): Promise<HopRun[]> {
  const out: HopRun[] = []
  for (const workload of WORKLOADS) {
    for (const [label, via] of [['sent to node-2', nodes[1]!], ['through node-1', nodes[0]!]] as const) {
      process.stderr.write(`  the hop in isolation, batching ${batch ? 'on' : 'off'}, ${workload.name} ${label}: warm-up ${WARMUP_S} s`)
      await runWrk(workload, [via], tenant, WARMUP_S, false, [idFiles[1]!])
      process.stderr.write(`, measuring ${DURATION_S} s`)
      const before = { nodes: nodes.map(node => processCpu(node.pid)), nats: sumCpu(natsPids) }
      const { runs } = await runWrk(workload, [via], tenant, DURATION_S, false, [idFiles[1]!])
      const after = { nodes: nodes.map(node => processCpu(node.pid)), nats: sumCpu(natsPids) }
      const requests = runs[0]!.requests
      const per = (seconds: number): number => requests === 0 ? 0 : seconds * 1e6 / requests
      out.push({ label, workload: workload.name, batch, rps: requests / DURATION_S, nodeUs: after.nodes.map((cpu, i) => per(cpu - before.nodes[i]!)), natsUs: per(after.nats - before.nats) })
      process.stderr.write(` — ${Math.round(requests / DURATION_S)} req/s\n`)
    }
  }
  return out
}

/** The bare NATS round trip of bench/nats-hop.ts: CPU µs per round trip in the two processes and in nats-server. */
interface Hop { inFlight: number, roundTrips: number, failed: number, clientUs: number, natsUs: number }

/** Two processes doing request/reply through two servers of `cluster` for DURATION_S (see bench/nats-hop.ts). */
async function measureHop (cluster: NatsCluster, natsPids: number[]): Promise<Hop> {
  // As many as (c) forwards at once: two requests in three of its connections.
  const inFlight = Math.max(1, Math.round(CONNECTIONS * 2 / 3))
  process.stderr.write(`  the hop's transport alone (NATS request/reply, ${inFlight} in flight): measuring ${DURATION_S} s`)
  const script = join(ROOT, 'bench', 'nats-hop.ts')
  const run = (args: string[]): ReturnType<typeof spawn> => track(spawn(process.execPath, ['--import', 'tsx', script, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] }))
  // A forwarded pageView: about 400 bytes out (route, headers, body), 300 back.
  const responder = run(['respond', cluster.urls[1]!, '300'])
  try {
    await new Promise<void>((resolve, reject) => {
      responder.stdout!.setEncoding('utf8').on('data', (text: string) => { if (text.includes('ready')) resolve() })
      responder.once('exit', code => reject(new Error(`the hop's responder exited with ${code}`)))
    })
    const requester = run(['request', cluster.urls[0]!, String(inFlight), String(DURATION_S), '400'])
    let out = ''
    const line = (prefix: string): Promise<string> => new Promise(resolve => {
      const look = (): void => {
        const found = out.split('\n').find(text => text.startsWith(prefix))
        if (found === undefined) return
        requester.stdout!.off('data', look)
        resolve(found)
      }
      requester.stdout!.on('data', look)
      look()
    })
    requester.stdout!.setEncoding('utf8').on('data', (text: string) => { out += text })
    await line('start')
    const before = { responder: processCpu(responder.pid!), nats: sumCpu(natsPids) }
    const { roundTrips, failed, cpuUs } = JSON.parse(await line('{')) as { roundTrips: number, failed: number, cpuUs: number }
    const after = { responder: processCpu(responder.pid!), nats: sumCpu(natsPids) }
    process.stderr.write(` — ${Math.round(roundTrips / DURATION_S)} round trips/s\n`)
    const per = (us: number): number => roundTrips === 0 ? 0 : us / roundTrips
    // processCpu counts seconds, the requester microseconds.
    return { inFlight, roundTrips, failed, clientUs: per((after.responder - before.responder) * 1e6 + cpuUs), natsUs: per((after.nats - before.nats) * 1e6) }
  } finally {
    responder.kill('SIGTERM')
  }
}

async function phaseThreeNodes (rows: Row[], runRows: boolean, runTakeover: boolean): Promise<{ takeover: Takeover | null, hop: Hop | null, isolated: HopRun[] }> {
  const cluster: NatsCluster = await startNatsCluster(null, natsRun.bin)
  const nodes: Node[] = []
  let isolated: HopRun[] = []
  try {
    const ids = ['node-1', 'node-2', 'node-3']
    // node-1 first, the two others once it is up: three nodes starting together on a new cluster can
    // fail (a node's first config-lock put answered "no responders" while the new R3 bucket elects its
    // leader: "beacon: failed to start: jetstream is not enabled", seen here on 2026-11-25).
    nodes.push(await startNode(ids[0]!, clusterEnv('bench3', cluster.urls, 3, ids[0]!)))
    await settled(nodes)
    const tenant = await createTenant(nodes[0]!, nodes)
    const natsPids = cluster.servers.map(server => server.pid!)
    if (runRows) for (const workload of WORKLOADS) rows.push(await measure('b3', workload, nodes, natsPids, tenant))
    nodes.push(...await Promise.all(ids.slice(1).map(id => startNode(id, clusterEnv('bench3', cluster.urls, 3, id)))))
    await settled(nodes)
    await served(tenant, nodes)
    // The joins hand 42 partitions over: snapshots, recoveries, and the compaction of what (b3) wrote
    // (one delete per message on nats-server < 2.9.18). Measured, that work would be charged to (c).
    await quiet([...nodes.map(node => node.pid), ...natsPids])
    if (runRows) {
      const idFiles = await ownedIdFiles(nodes, tenant)
      // (c) over the visitors (c2) wrote, every wrk drawing from all of them (two in three forwarded): the
      // same state to load and write as (c2), so (c) − (c2) is the hop. Over (b3)'s pool instead, (c) paid
      // the activation of visitors whose partitions the joins had moved, which (c2)'s fresh ids do not.
      const everyId = allIdsFile(idFiles)
      const routed = await routedLoad(nodes, tenant)
      let client: Awaited<ReturnType<typeof clientDriver>> | null = null
      try {
        client = await clientDriver(nodes, tenant)
        const driver = client
        const compared: Array<(workload: Workload) => Promise<Row>> = [
          workload => measure('c2', workload, nodes, natsPids, tenant, idFiles),
          workload => measure('c2k', workload, nodes, natsPids, tenant, idFiles),
          workload => measure('c', workload, nodes, natsPids, tenant, nodes.map(() => everyId)),
          workload => measure('n', workload, nodes, natsPids, tenant, routed.idFiles, { pid: routed.pid, via: routed.via }),
          workload => measure('cn', workload, nodes, natsPids, tenant, null, null, driver.load(workload)),
        ]
        // Interleaved rounds, each in another order (rotated): a slow spell of the machine falls on every
        // row alike, and no row always runs right after the same one.
        for (let round = 1; round <= REPEAT; round++) {
          if (REPEAT > 1) process.stderr.write(`  round ${round} of ${REPEAT}\n`)
          for (let k = 0; k < compared.length; k++) {
            const run = compared[(k + round - 1) % compared.length]!
            for (const workload of WORKLOADS) rows.push({ ...await run(workload), round })
          }
        }
      } finally {
        await routed.stop()
        await client?.close()
      }
      isolated = await measureIsolatedHop(nodes, natsPids, tenant, idFiles, true)
      // The same with batching off at the forwarding node: node-1 restarted with BEACON_FORWARD_BATCH=false
      // (the owner serves both ways), the cluster settled and quiet again, ids node-2 owns now.
      process.stderr.write('  restarting node-1 with BEACON_FORWARD_BATCH=false\n')
      await nodes[0]!.stop()
      nodes[0] = await startNode(ids[0]!, { ...clusterEnv('bench3', cluster.urls, 3, ids[0]!), BEACON_FORWARD_BATCH: 'false' })
      // Longer than the joins' wait: on a busy machine a restart's handovers took over 90 s (2026-11-27-hop.md).
      await settled(nodes, RESTART_SETTLE_MS)
      await served(tenant, nodes)
      await quiet([...nodes.map(node => node.pid), ...natsPids])
      isolated.push(...await measureIsolatedHop(nodes, natsPids, tenant, await ownedIdFiles(nodes, tenant), false))
      // And (c) with batching off on every node: node-2 and node-3 restarted as node-1 was.
      process.stderr.write('  restarting node-2 and node-3 with BEACON_FORWARD_BATCH=false\n')
      for (const i of [1, 2]) {
        await nodes[i]!.stop()
        nodes[i] = await startNode(ids[i]!, { ...clusterEnv('bench3', cluster.urls, 3, ids[i]!), BEACON_FORWARD_BATCH: 'false' })
        await settled(nodes, RESTART_SETTLE_MS)
      }
      await served(tenant, nodes)
      await quiet([...nodes.map(node => node.pid), ...natsPids])
      for (const workload of WORKLOADS) rows.push(await measure('cOff', workload, nodes, natsPids, tenant, nodes.map(() => everyId)))
    }
    const hop = runRows ? await measureHop(cluster, natsPids) : null
    return { takeover: runTakeover ? await takeoverOf(nodes, tenant) : null, hop, isolated }
  } finally {
    // SIGTERM (a SIGKILLed node is already gone): a node started with --cpu-prof writes its profile.
    await Promise.all(nodes.map(node => node.stop()))
    await cluster.close()
  }
}

/**
 * (n): the three nodes behind a real nginx running deploy/nginx-cluster.conf. The ids' hints are learned
 * as a client learns them: one read of each fresh id through nginx without a hint (any node answers,
 * forwarding when it is not the owner), grouped by the Beacon-Route of its answer; then wrk i sends
 * the ids of group i with that hint, as the SDK echoes it.
 */
async function routedLoad (nodes: Node[], tenant: Tenant): Promise<{ idFiles: string[], via: Via[], pid: number, stop: () => Promise<void> }> {
  const addresses = nodes.map(node => ({ id: node.id, address: node.url.slice('http://'.length) }))
  const nginx = await startNginxWith(port => clusterNginxConf(addresses, port), 4 * CONNECTIONS + 256)
  try {
    process.stderr.write(`  (n) learning the route hints of ${VISITORS} visitors through nginx`)
    const groups = new Map<string, string[]>(nodes.map(node => [node.id, []]))
    let next = 0
    const learn = async (): Promise<void> => {
      while (next < VISITORS) {
        next++
        const id = randomUUID()
        const res = await fetch(`${nginx.url}/visitors/query`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ account: tenant.account, token: tenant.token, visitorId: id }) })
        await res.arrayBuffer()
        const hint = res.headers.get('beacon-route')
        if (res.status !== 200 || hint === null || !groups.has(hint)) throw new Error(`learning a hint through nginx: ${res.status}, Beacon-Route ${hint}`)
        groups.get(hint)!.push(id)
      }
    }
    await Promise.all(Array.from({ length: 32 }, learn))
    process.stderr.write(` (${nodes.map(node => groups.get(node.id)!.length).join(' / ')})\n`)
    const dir = mkdtempSync(join(tmpdir(), 'bench-cluster-hinted-'))
    tempDirs.add(dir)
    const idFiles = nodes.map(node => {
      const file = join(dir, `${node.id}.txt`)
      writeFileSync(file, groups.get(node.id)!.join('\n') + '\n')
      return file
    })
    const via = nodes.map(node => ({ url: nginx.url, header: `Beacon-Route: ${node.id}` }))
    return { idFiles, via, pid: nginx.pid, stop: () => nginx.stop() }
  } catch (error) {
    await nginx.stop()
    throw error
  }
}

/**
 * The Node client's rows: beacon/client in this process, CONNECTIONS calls in flight over a pool of
 * VISITORS visitor ids, each sent to its owner from the route map (the nodes' GET /cluster/routes). Its
 * p50 and p99 come from every answer's latency.
 */
async function clientDriver (nodes: Node[], tenant: Tenant): Promise<{ load: (workload: Workload) => Load, close: () => Promise<void> }> {
  const client = new BeaconClient({
    url: nodes.map(node => node.url), account: tenant.account, token: tenant.token,
    connectionsPerNode: Math.ceil(CONNECTIONS / nodes.length),
  })
  if (await client.refreshRoutes() === null) {
    await client.close()
    throw new Error('no node gave its route map (GET /cluster/routes)')
  }
  const ids = Array.from({ length: VISITORS }, () => randomUUID())
  const load = (workload: Workload): Load => {
    const call = workload.name === 'pageView'
      ? (visitorId: string, n: number) => client.campaignsQuery({ visitorId, platform: 'web', device: 'desktop', event: 'pageView', path: `/products/${n % 997}`, referrer: null })
      : (visitorId: string, n: number) => client.visitorsAttributes({ visitorId, attributes: { plan: `plan-${n % 5}`, visits: n, newsletter: n % 2 === 0 } })
    return (seconds, check) => clientLoad(ids, call, seconds, check)
  }
  return { load, close: () => client.close() }
}

/** CONNECTIONS loops calling `call` for `seconds`, as wrk would report them. */
async function clientLoad (ids: string[], call: (visitorId: string, n: number) => Promise<unknown>, seconds: number, check: boolean): Promise<{ runs: WrkResult[], cpuS: number }> {
  const latencies: number[] = []
  let failed = 0
  let sample: string | null = null
  let n = 0
  const cpuBefore = process.cpuUsage()
  const started = performance.now()
  const end = started + seconds * 1000
  await Promise.all(Array.from({ length: CONNECTIONS }, async () => {
    while (performance.now() < end) {
      const at = performance.now()
      try {
        await call(ids[(n * 7919) % ids.length]!, n++)
        latencies.push(performance.now() - at)
      } catch (error) {
        failed++
        sample ??= String(error)
      }
      if (PAUSE_MS > 0) await sleep(PAUSE_MS)
    }
  }))
  const cpu = process.cpuUsage(cpuBefore)
  latencies.sort((a, b) => a - b)
  const at = (q: number): number => (latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0) * 1000
  const run: WrkResult = {
    requests: latencies.length, duration_us: (performance.now() - started) * 1000,
    errors: { connect: 0, read: 0, write: 0, status: failed, timeout: 0 },
    latency_us: { p50: at(0.5), p99: at(0.99), max: at(1) },
    check: check ? { responses: latencies.length + failed, non2xx: failed, sample } : null,
  }
  return { runs: [run], cpuS: (cpu.user + cpu.system) / 1e6 }
}

/**
 * Per node, a file of VISITORS / nodes fresh visitor ids of partitions that node owns now: with these
 * a wrk sends each request to its key's owner, as a partition-aware client or balancer would (the
 * partition map from /admin/cluster, the hash from src/cluster/partition.ts).
 */
async function ownedIdFiles (nodes: Node[], tenant: Tenant): Promise<string[]> {
  const owner = new Map<number, number>()
  for (const [i, node] of nodes.entries()) {
    for (const partition of ((await call(node.url, 'GET', '/admin/cluster')).body as ClusterAnswer).owned) owner.set(partition, i)
  }
  const per = Math.ceil(VISITORS / nodes.length)
  const lists: string[][] = nodes.map(() => [])
  while (lists.some(list => list.length < per)) {
    const id = randomUUID()
    const list = lists[owner.get(partitionOf(tenant.account, id, PARTITIONS)) ?? -1]
    if (list !== undefined && list.length < per) list.push(id)
  }
  const dir = mkdtempSync(join(tmpdir(), 'bench-cluster-ids-'))
  tempDirs.add(dir)
  return lists.map((list, i) => {
    const file = join(dir, `${nodes[i]!.id}.txt`)
    writeFileSync(file, list.join('\n') + '\n')
    return file
  })
}

/** One file of the ids of every file of `files` (a wrk given it sends each request to any owner). */
function allIdsFile (files: string[]): string {
  const file = join(dirname(files[0]!), 'all.txt')
  writeFileSync(file, files.map(one => readFileSync(one, 'utf8')).join(''))
  return file
}

/**
 * Writes TAKEOVER_VISITORS visitors into one partition of node-3, SIGKILLs node-3 and reads one of them
 * through node-1 until it is answered; then reads every one of them back.
 */
async function takeoverOf (nodes: Node[], tenant: Tenant): Promise<Takeover> {
  const victim = nodes[2]!
  const survivors = nodes.slice(0, 2)
  await settled(nodes)
  const status = (await call(victim.url, 'GET', '/admin/cluster')).body as ClusterAnswer & { changelogEntries: number[] }
  const partition = status.owned[0]!
  process.stderr.write(`  takeover: writing ${TAKEOVER_VISITORS} visitors into partition ${partition} (owned by ${victim.id})`)
  const visitors: string[] = []
  while (visitors.length < TAKEOVER_VISITORS) {
    const id = randomUUID()
    if (partitionOf(tenant.account, id, PARTITIONS) === partition) visitors.push(id)
  }
  const started = performance.now()
  let next = 0
  const write = async (worker: number): Promise<void> => {
    for (;;) {
      const i = next++
      if (i >= visitors.length) return
      const node = nodes[(i + worker) % nodes.length]!
      const answer = await call(node.url, 'POST', '/visitors/attributes', { account: tenant.account, token: tenant.token, visitorId: visitors[i], attributes: { n: i, plan: 'pro' } }, false)
      if (answer.status !== 200) throw new Error(`write of visitor ${i} through ${node.id}: ${answer.status} ${JSON.stringify(answer.body)}`)
    }
  }
  await Promise.all(Array.from({ length: 48 }, (_, worker) => write(worker)))
  const writeRps = visitors.length / ((performance.now() - started) / 1000)
  process.stderr.write(` (${Math.round(writeRps)}/s)`)
  const after = (await call(victim.url, 'GET', '/admin/cluster')).body as ClusterAnswer & { changelogEntries: number[] }
  const index = after.owned.indexOf(partition)
  const changelogEntries = index < 0 ? null : after.changelogEntries?.[index] ?? null
  const takeoverCountBefore = await metricSum(survivors, 'beacon_cluster_takeover_seconds_count')
  const takeoverSumBefore = await metricSum(survivors, 'beacon_cluster_takeover_seconds_sum')
  const probe = visitors.length - 1

  process.stderr.write(', SIGKILL')
  const killedAt = performance.now()
  await victim.kill()
  let refusedPolls = 0
  let emptyReads = 0
  let killToServedMs = 0
  for (;;) {
    const answer = await call(survivors[0]!.url, 'POST', '/visitors/query', { account: tenant.account, token: tenant.token, visitorId: visitors[probe] }, false)
    if (answer.status === 200 && attributeN(answer.body) === probe) { killToServedMs = performance.now() - killedAt; break }
    if (answer.status === 200) emptyReads++
    else refusedPolls++
    if (performance.now() - killedAt > 60_000) throw new Error(`partition ${partition} not served 60 s after the kill: ${answer.status} ${JSON.stringify(answer.body)}`)
    await sleep(10)
  }
  process.stderr.write(` — served ${Math.round(killToServedMs)} ms after the kill\n`)

  await settled(survivors)
  let takeoverMs: number | null = null
  let recoveryMs: number | null = null
  for (const node of survivors) {
    for (const line of node.output().split('\n')) {
      if (!line.includes('"msg":"partition taken over"')) continue
      const entry = JSON.parse(line) as { partition: number, takeoverMs: number, recoveryMs: number }
      if (entry.partition === partition) { takeoverMs = entry.takeoverMs; recoveryMs = entry.recoveryMs }
    }
  }
  const takeovers = await metricSum(survivors, 'beacon_cluster_takeover_seconds_count') - takeoverCountBefore
  const takeoverSeconds = await metricSum(survivors, 'beacon_cluster_takeover_seconds_sum') - takeoverSumBefore

  // Every acknowledged write of the partition is there.
  let readBack = 0
  let wrong = 0
  let cursor = 0
  const read = async (worker: number): Promise<void> => {
    for (;;) {
      const i = cursor++
      if (i >= visitors.length) return
      const answer = await call(survivors[(i + worker) % 2]!.url, 'POST', '/visitors/query', { account: tenant.account, token: tenant.token, visitorId: visitors[i] }, false)
      if (answer.status === 200 && attributeN(answer.body) === i) readBack++
      else wrong++
    }
  }
  await Promise.all(Array.from({ length: 32 }, (_, worker) => read(worker)))
  if (wrong > 0 || emptyReads > 0) {
    // Evidence for whoever looks into it: every node's log, the killed one's included.
    for (const node of nodes) writeFileSync(join(tmpdir(), `bench-cluster-${node.id}.log`), node.output())
    process.stderr.write(`  takeover: ${emptyReads} reads answered 200 without the write, ${wrong} visitors missing or wrong; node logs in ${join(tmpdir(), 'bench-cluster-node-*.log')}\n`)
  }
  return {
    partition, visitors: visitors.length, writeRps, changelogEntries, killToServedMs, refusedPolls, emptyReads, takeoverMs, recoveryMs,
    takeovers, meanTakeoverMs: takeovers > 0 ? takeoverSeconds / takeovers * 1000 : null, readBack, wrong,
  }
}

// ---------------------------------------------------------------------------------------------
// Report

interface Target { name: string, value: string, met: boolean }

/** CPU microseconds per request, Beacon and nats-server processes together. */
const cpu = (row: Row): number => row.beaconUs + row.natsUs

/**
 * Where (c)'s CPU per request goes, from the decomposition rows: what R3 adds to one node (b3 - b),
 * what three nodes add without forwarding (c2 - b3), and what the forwarding hop costs (c - c2, per
 * request, and per forwarded request).
 */
function decomposition (rows: Row[], hop: Hop | null, isolated: HopRun[]): string[] {
  const lines: string[] = []
  for (const { name } of WORKLOADS) {
    const [b, b3, c, c2] = (['b', 'b3', 'c', 'c2'] as const).map(phase => rows.find(row => row.phase === phase && row.workload === name && row.failed === null))
    if (b === undefined || b3 === undefined || c === undefined || c2 === undefined || c.forwardedShare === null || c.forwardedShare === 0) continue
    const us = (value: number): string => `${value >= 0 ? '+' : ''}${value.toFixed(0)} µs`
    lines.push(`  ${name}: one node ${cpu(b).toFixed(0)} µs/req on R1; R3 ${us(cpu(b3) - cpu(b))} (Beacon ${us(b3.beaconUs - b.beaconUs)}, NATS ${us(b3.natsUs - b.natsUs)}); ` +
      `three nodes to the owner ${us(cpu(c2) - cpu(b3))}; the forwarding hop ${us(cpu(c) - cpu(c2))} a request ` +
      `(${((cpu(c) - cpu(c2)) / c.forwardedShare).toFixed(0)} µs per forwarded request, ${(c.forwardedShare * 100).toFixed(0)} % forwarded)`)
  }
  for (const { name } of WORKLOADS) {
    for (const batch of [true, false]) {
      const [sent, through] = ['sent to node-2', 'through node-1'].map(label => isolated.find(run => run.workload === name && run.label === label && run.batch === batch))
      if (sent === undefined || through === undefined) continue
      const us = (value: number): string => `${value.toFixed(0)} µs`
      lines.push(`  ${name}, the hop in isolation, batching ${batch ? 'on' : 'off'} (one wrk, ids node-2 owns): sent to node-2 ${Math.round(sent.rps)} req/s, node-2 ${us(sent.nodeUs[1]!)} + NATS ${us(sent.natsUs)} a request; ` +
        `through node-1 ${Math.round(through.rps)} req/s, node-1 (receiving, forwarding) ${us(through.nodeUs[0]!)}, node-2 ${us(through.nodeUs[1]!)} (${us(through.nodeUs[1]! - sent.nodeUs[1]!)} more), NATS ${us(through.natsUs)}; ` +
        `the hop ${us(hopUs(isolated, name, batch)!)} per forwarded request`)
    }
  }
  for (const { name } of WORKLOADS) {
    const [on, off] = (['c', 'cOff'] as const).map(phase => rows.find(row => row.phase === phase && row.workload === name && row.failed === null))
    if (on === undefined || off === undefined) continue
    lines.push(`  ${name}, (c) with batching on over off: CPU per request ${cpu(on).toFixed(0)} / ${cpu(off).toFixed(0)} µs = ${(cpu(on) / cpu(off)).toFixed(2)}x, req/s ${(on.rps / off.rps).toFixed(2)}x`)
  }
  if (hop !== null) {
    lines.push(`  the hop's transport alone (bench/nats-hop.ts: request/reply between two processes through two NATS servers, ${hop.inFlight} in flight, no Beacon): ` +
      `${(hop.clientUs + hop.natsUs).toFixed(0)} µs per round trip (the two processes ${hop.clientUs.toFixed(0)}, NATS ${hop.natsUs.toFixed(0)}; ${hop.roundTrips} round trips, ${hop.failed} failed)`)
  }
  return lines
}

/**
 * The hop's CPU per forwarded request in isolation: all processes' CPU per request through node-1 minus
 * sent to node-2 (each with batching on or off); null when either run is missing.
 */
function hopUs (isolated: HopRun[], workload: string, batch: boolean): number | null {
  const [sent, through] = ['sent to node-2', 'through node-1'].map(label => isolated.find(run => run.workload === workload && run.label === label && run.batch === batch))
  if (sent === undefined || through === undefined) return null
  const total = (run: HopRun): number => run.nodeUs.reduce((sum, us) => sum + us, 0) + run.natsUs
  return total(through) - total(sent)
}

function judge (rows: Row[], takeover: Takeover | null, isolated: HopRun[]): Target[] {
  const targets: Target[] = []
  const find = (phase: Row['phase'], workload: string): Row | undefined => rows.find(row => row.phase === phase && row.workload === workload && row.failed === null)
  for (const { name } of WORKLOADS) {
    const a = find('a', name)
    const b = find('b', name)
    const c = find('c', name)
    if (a !== undefined && b !== undefined) {
      const ratio = b.rps / a.rps
      targets.push({ name: `${name}: (b) req/s >= ${CLUSTER_RATIO_TARGET}x (a)`, value: `${ratio.toFixed(2)}x`, met: ratio >= CLUSTER_RATIO_TARGET })
    }
    if (b !== undefined && c !== undefined) {
      const growth = cpu(c) / cpu(b)
      targets.push({ name: `${name}: CPU per request (c) <= ${CPU_GROWTH_TARGET}x (b) (Beacon + NATS)`, value: `${growth.toFixed(2)}x`, met: growth <= CPU_GROWTH_TARGET })
    }
    // The same target with the replication and the forwarding hop held equal: three nodes, each request
    // sent to its key's owner, against one node on the same R3 NATS cluster.
    const b3 = find('b3', name)
    const c2 = find('c2', name)
    const routed = find('n', name)
    if (c2 !== undefined && routed !== undefined) {
      const ratio = cpu(routed) / cpu(c2)
      const withProxy = (cpu(routed) + (routed.proxyUs ?? 0)) / cpu(c2)
      targets.push({ name: `${name}: CPU per request (n) <= ${ROUTED_TARGET}x (c2) (Beacon + NATS; with nginx's own ${withProxy.toFixed(2)}x)`, value: `${ratio.toFixed(2)}x`, met: ratio <= ROUTED_TARGET })
    }
    const cn = find('cn', name)
    if (cn !== undefined && c2 !== undefined) {
      const ratio = cpu(cn) / cpu(c2)
      targets.push({ name: `${name}: CPU per request, Node client owner-routed <= ${NODE_CLIENT_TARGET}x (c2) (Beacon + NATS)`, value: `${ratio.toFixed(2)}x`, met: ratio <= NODE_CLIENT_TARGET })
    }
    // The client sends an Idempotency-Key on every write, wrk in (c2) none: the same comparison with the
    // key on both sides tells the client's routing from the key's own cost.
    const c2k = find('c2k', name)
    if (cn !== undefined && c2k !== undefined) {
      const ratio = cpu(cn) / cpu(c2k)
      targets.push({ name: `${name}: CPU per request, Node client owner-routed <= ${NODE_CLIENT_TARGET}x (c2k) (both with an Idempotency-Key on every request)`, value: `${ratio.toFixed(2)}x`, met: ratio <= NODE_CLIENT_TARGET })
    }
    if (b3 !== undefined && c2 !== undefined) {
      const growth = cpu(c2) / cpu(b3)
      targets.push({ name: `${name}: CPU per request (c2) <= ${CPU_GROWTH_TARGET}x (b3) (three nodes vs one, same R3 NATS, no forwarding)`, value: `${growth.toFixed(2)}x`, met: growth <= CPU_GROWTH_TARGET })
    }
    // Issue 32: batched forwarding.
    if (c !== undefined && c2 !== undefined) {
      const ratio = cpu(c) / cpu(c2)
      targets.push({ name: `${name}: CPU per request (c) <= ${FORWARDED_TARGET}x (c2) (forwarding batched)`, value: `${ratio.toFixed(2)}x`, met: ratio <= FORWARDED_TARGET })
    }
    const [on, off] = [hopUs(isolated, name, true), hopUs(isolated, name, false)]
    if (on !== null && off !== null) {
      targets.push({ name: `${name}: the hop's CPU per forwarded request in isolation, batching on <= ${HOP_BATCH_TARGET}x off`, value: `${on.toFixed(0)} / ${off.toFixed(0)} µs = ${(on / off).toFixed(2)}x`, met: on <= HOP_BATCH_TARGET * off })
    }
  }
  if (takeover !== null) {
    // The takeover counts from when the lease was seen gone (BEACON_LEASE_MS after the last renew: the time
    // a silent node is given, a setting) to the partition recovered and served: the new owner's own measure.
    // SIGKILL → served, which adds the lease time, is printed beside it.
    const takeoverMs = takeover.takeoverMs
    targets.push({ name: `takeover of a partition of ${takeover.visitors} visitors <= ${TAKEOVER_TARGET_MS} ms (lease seen gone → recovered, new owner's measure)`, value: takeoverMs === null ? 'not logged' : `${takeoverMs} ms`, met: takeoverMs !== null && takeoverMs <= TAKEOVER_TARGET_MS })
    targets.push({ name: 'every visitor of that partition read back after the takeover', value: `${takeover.readBack} of ${takeover.visitors}`, met: takeover.wrong === 0 })
    targets.push({ name: 'no read answered without an acknowledged write during the takeover', value: `${takeover.emptyReads}`, met: takeover.emptyReads === 0 })
  }
  return targets
}

function table (rows: Row[]): string {
  const header = ['setup', 'load', 'req/s', 'ratio to (a)', 'p50 ms', 'p99 ms', 'CPU µs/req Beacon', 'NATS', 'total', 'vs (b)', 'forwarded', 'nginx', 'wrk / other cores', 'errors']
  const out = [header]
  for (const row of rows) {
    const a = rows.find(r => r.phase === 'a' && r.workload === row.workload && r.failed === null)
    const b = rows.find(r => r.phase === 'b' && r.workload === row.workload && r.nats === row.nats && r.failed === null)
    const ok = row.failed === null
    const total = row.beaconUs + row.natsUs
    out.push([
      row.label, row.workload,
      ok ? Math.round(row.rps).toLocaleString('en-US') : '—',
      ok && a !== undefined ? `${(row.rps / a.rps).toFixed(2)}x` : '—',
      ok ? row.p50Ms.toFixed(2) : '—',
      ok ? row.p99Ms.toFixed(2) : '—',
      ok ? row.beaconUs.toFixed(0) : '—',
      ok ? row.natsUs.toFixed(0) : '—',
      ok ? total.toFixed(0) : '—',
      ok && b !== undefined && row.phase !== 'a' ? `${(total / cpu(b)).toFixed(2)}x` : '—',
      row.forwardedShare === null ? '—' : `${(row.forwardedShare * 100).toFixed(1)}%${row.perBatch === null ? '' : `, ${row.perBatch.toFixed(1)} a batch`}`,
      ok && row.proxyUs !== null ? row.proxyUs.toFixed(0) : '—',
      ok ? `${row.wrkCores.toFixed(2)} / ${row.otherCores.toFixed(2)}` : '—',
      ok ? 'none' : 'FAILED',
    ])
  }
  const widths = header.map((_, c) => Math.max(...out.map(r => r[c]!.length)))
  const left = new Set([0, 1, 13])
  const fmt = (r: string[]): string => '| ' + r.map((cell, c) => left.has(c) ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!)).join(' | ') + ' |'
  const rule = '|' + widths.map((w, c) => left.has(c) ? '-'.repeat(w + 2) : '-'.repeat(w + 1) + ':').join('|') + '|'
  return [fmt(header), rule, ...out.slice(1).map(fmt)].join('\n')
}

/**
 * One row per setup, load and server: a row measured in several rounds (BENCH_REPEAT) reports its median
 * round by CPU per request (Beacon + NATS), or its failed round if one failed; in the order first run.
 */
function medianRounds (rows: Row[]): Row[] {
  const groups = new Map<string, Row[]>()
  for (const row of rows) {
    const key = `${row.phase} ${row.workload} ${row.nats}`
    const group = groups.get(key)
    if (group === undefined) groups.set(key, [row])
    else group.push(row)
  }
  return [...groups.values()].map(group => group.find(row => row.failed !== null) ?? [...group].sort((a, b) => cpu(a) - cpu(b))[group.length >> 1]!)
}

/** The targets' ratios of the rows compared on (c)'s cluster, each within one round: how much they move. */
function roundRatios (rows: Row[]): string[] {
  const lines: string[] = []
  const pairs: Array<[Row['phase'], Row['phase']]> = [['n', 'c2'], ['cn', 'c2k'], ['cn', 'c2'], ['c', 'c2'], ['c2k', 'c2']]
  for (const { name } of WORKLOADS) {
    for (const [top, bottom] of pairs) {
      const ratios: string[] = []
      for (let round = 1; round <= REPEAT; round++) {
        const [x, y] = [top, bottom].map(phase => rows.find(row => row.phase === phase && row.workload === name && row.round === round && row.nats === 'new' && row.failed === null))
        ratios.push(x === undefined || y === undefined ? '—' : `${(cpu(x) / cpu(y)).toFixed(2)}x`)
      }
      lines.push(`  ${name}: ${LABELS[top]} over ${LABELS[bottom]}: ${ratios.join(', ')}`)
    }
  }
  return lines
}

/** Per cluster row run on both servers: req/s and CPU per request (Beacon + NATS) of the new over the old. */
function natsRatios (rows: Row[]): string[] {
  const lines: string[] = []
  for (const row of rows) {
    if (row.nats !== 'new' || row.phase === 'a' || row.failed !== null) continue
    const old = rows.find(r => r.nats === 'old' && r.phase === row.phase && r.workload === row.workload && r.failed === null)
    if (old === undefined) continue
    lines.push(`  ${LABELS[row.phase]} ${row.workload}: req/s ${(row.rps / old.rps).toFixed(2)}x, CPU µs per request ${(cpu(row) / cpu(old)).toFixed(2)}x ` +
      `(Beacon ${(row.beaconUs / old.beaconUs).toFixed(2)}x, nats-server ${(row.natsUs / old.natsUs).toFixed(2)}x)`)
  }
  return lines.length > 0 ? lines : ['  no row ran on both']
}

/** The first line a program prints for its version (wrk -v exits with 1 after printing it). */
function version (file: string, args: string[]): string {
  const run = spawnSync(file, args, { encoding: 'utf8' })
  if (run.error !== undefined) return `(${file} ${args.join(' ')} failed: ${run.error.message})`
  return `${run.stdout}${run.stderr}`.trim().split('\n')[0]!
}

async function main (): Promise<void> {
  const unknown = ONLY.filter(name => !(PHASES as readonly string[]).includes(name))
  if (unknown.length > 0) throw new Error(`BENCH_ONLY: unknown phase ${unknown.join(', ')}; known: ${PHASES.join(', ')}`)
  const selected = (phase: typeof PHASES[number]): boolean => ONLY.length === 0 || ONLY.includes(phase)
  const build = version('git', ['-C', ROOT, 'describe', '--always', '--dirty'])
  const machine = `${cpus().length} cores (${cpus()[0]?.model.trim() ?? 'unknown CPU'}), Node ${process.version}, ` +
    `${version(WRK, ['-v']).match(/^wrk \S+/)?.[0] ?? 'wrk (unknown version)'}, ` +
    NATS_RUNS.map(run => `${run.tag === 'old' ? 'old: ' : ''}${version(run.bin, ['--version'])}`).join(', ')
  process.stderr.write(`bench:cluster — build ${build}; ${machine}\n` +
    `${CONNECTIONS} connections, ${DURATION_S} s per row (+${WARMUP_S} s warm-up), ${VISITORS} visitors, ` +
    `${PARTITIONS} partitions, lease ${LEASE_MS} ms, takeover of ${TAKEOVER_VISITORS} visitors\n`)
  const loadBefore = machineCpu()
  await sleep(1000)
  const busyBefore = machineCpu() - loadBefore
  if (busyBefore > 0.25) process.stderr.write(`warning: the machine is already busy (${busyBefore.toFixed(2)} cores in use before the run)\n`)

  const rows: Row[] = []
  let takeover: Takeover | null = null
  let hop: Hop | null = null
  let isolated: HopRun[] = []
  const failures: string[] = []
  const attempt = async (name: string, run: () => Promise<void>): Promise<void> => {
    try {
      await run()
    } catch (error) {
      failures.push(`${name}: ${(error instanceof Error ? error.message : String(error)).slice(0, 3000)}`)
      process.stderr.write(` — FAILED\n${name}: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`)
    }
  }
  if (selected('a')) await attempt('(a)', () => phaseEmbedded(rows))
  // With BENCH_NATS_OLD each cluster phase runs on the new server, then on the old one, before the next.
  const takeovers: Array<{ nats: NatsRun['tag'], takeover: Takeover }> = []
  for (const run of NATS_RUNS) {
    natsRun = run
    if (selected('b')) await attempt(run.tag === 'old' ? '(b) [old NATS]' : '(b)', () => phaseOneNode(rows))
  }
  if (selected('c') || selected('takeover')) {
    for (const run of NATS_RUNS) {
      natsRun = run
      await attempt(run.tag === 'old' ? '(c) [old NATS]' : '(c)', async () => {
        const result = await phaseThreeNodes(rows, selected('c'), selected('takeover'))
        if (result.takeover !== null) takeovers.push({ nats: run.tag, takeover: result.takeover })
        if (run.tag === 'new') ({ takeover, hop, isolated } = result)
      })
    }
  }
  const measured = medianRounds(rows)
  const newRows = measured.filter(row => row.nats === 'new')

  const targets = judge(newRows, takeover, isolated)
  process.stdout.write(`\nbench:cluster ${new Date().toISOString()} — build ${build}; ${machine}; load before ${busyBefore.toFixed(2)} cores\n`)
  process.stdout.write(`${CONNECTIONS} connections (split over the nodes in (c)), ${PAUSE_MS > 0 ? `each pausing ${PAUSE_MS} ms after every answer, ` : ''}${DURATION_S} s per row, ${REPEAT} round${REPEAT > 1 ? 's' : ''}, lease ${LEASE_MS} ms, ${PARTITIONS} partitions\n\n`)
  process.stdout.write(table(measured) + '\n\n')
  if (REPEAT > 1) process.stdout.write(`Each row above: its median of ${REPEAT} rounds by CPU per request. The compared ratios round by round (CPU per request, Beacon + NATS):\n${roundRatios(rows).join('\n')}\n\n`)
  if (NATS_RUNS.length > 1) process.stdout.write(`New nats-server over old (${NATS_RUNS.map(run => run.bin).join(' over ')}), same run:\n${natsRatios(measured).join('\n')}\n\n`)
  const parts = decomposition(newRows, hop, isolated)
  if (parts.length > 0) process.stdout.write(`CPU per request, where it goes (Beacon + NATS):\n${parts.join('\n')}\n\n`)
  for (const row of rows) if (row.failed !== null) process.stdout.write(`FAILED ${row.label} ${row.workload}: ${row.failed}\n`)
  for (const { nats, takeover: t } of takeovers) {
    if (NATS_RUNS.length > 1) process.stdout.write(`[${nats} NATS] `)
    process.stdout.write(`Takeover: partition ${t.partition} with ${t.visitors} visitors (written at ${Math.round(t.writeRps)}/s through the 3 nodes; ` +
      `${t.changelogEntries ?? '?'} changelog entries since its last snapshot), its owner SIGKILLed:\n` +
      `  SIGKILL → a read of one of them answered through another node: ${Math.round(t.killToServedMs)} ms (${t.refusedPolls} reads refused 503 meanwhile` +
      `${t.emptyReads > 0 ? `, ${t.emptyReads} ANSWERED 200 WITHOUT THE ACKNOWLEDGED WRITE` : ''})\n` +
      `  the new owner's account (lease seen gone → recovered): ${t.takeoverMs ?? '?'} ms, of which recovery (claim, replay, local rewrite) ${t.recoveryMs ?? '?'} ms\n` +
      `  beacon_cluster_takeover_seconds on the survivors: ${t.takeovers} takeovers, mean ${t.meanTakeoverMs === null ? '?' : Math.round(t.meanTakeoverMs)} ms\n` +
      `  read back afterwards: ${t.readBack} of ${t.visitors} with their write${t.wrong > 0 ? `, ${t.wrong} MISSING OR WRONG` : ''}\n\n`)
  }
  process.stdout.write('Targets:\n')
  for (const target of targets) process.stdout.write(`  ${target.met ? 'PASS' : 'FAIL'} ${target.name}: ${target.value}\n`)
  for (const failure of failures) process.stdout.write(`FAILED ${failure}\n`)
  process.stdout.write('BENCH_JSON=' + JSON.stringify({
    date: new Date().toISOString(), build, machine, busyBefore, connections: CONNECTIONS, durationS: DURATION_S, warmupS: WARMUP_S,
    leaseMs: LEASE_MS, partitions: PARTITIONS, nats: NATS_RUNS, rows, hop, isolated, takeover, takeovers, targets, failures,
  }) + '\n')
  const failedRows = rows.some(row => row.failed !== null)
  if (failures.length > 0 || failedRows || (process.env.BENCH_STRICT === '1' && targets.some(target => !target.met))) process.exitCode = 1
}

/** The value of attribute `n` in a /visitors/query answer (attributes are lists of { value }). */
function attributeN (body: any): unknown {
  return body?.attributes?.n?.[0]?.value
}

function sleep (ms: number): Promise<void> {
  return new Promise(resolve => setTimeout(resolve, ms))
}

function intEnv (name: string, fallback: number): number {
  const raw = process.env[name]
  if (raw === undefined || raw === '') return fallback
  const n = Number(raw)
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name}=${JSON.stringify(raw)}: expected a whole number >= 1`)
  return n
}

main().catch((error: unknown) => {
  process.stderr.write(`bench:cluster failed: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`)
  cleanup()
  process.exitCode = 1
})
