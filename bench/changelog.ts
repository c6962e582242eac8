// `npm run bench:changelog`: how many appends/s the cluster's changelog sustains, with one JetStream
// stream (what cluster mode runs today) and with the partitions spread over S streams whose raft leaders
// sit on different servers, on the same 3-server R3 cluster in one run (test/helpers/nats-cluster.ts).
//
// The appenders are Beacon's own Changelog (src/cluster/changelog.ts: group commit per partition, fenced
// publishes), three child processes like three nodes: appender i connects to server i first and claims
// every third partition. Each keeps BENCH_IN_FLIGHT appends in flight, spread evenly over its
// partitions, each append one entry of BENCH_ENTRY_BYTES (about an attribute write's). A row is measured
// after a warm-up: appends acknowledged per second, JetStream messages per second (group commits), and
// the CPU of each nats-server (/proc/<pid>/stat utime + stime, leaders named; with one stream its
// leader's µs per message) and of the appenders, in cores (CPU seconds per second) and µs per append. The machine's busy cores over the row say whether
// the two cores were the limit.
//
// Rows, in turn (BENCH_ROUNDS times): S = 1, then S = BENCH_STREAMS (default 3). For S > 1 the leaders
// are spread by `stream leader stepdown` (the JetStream API's STREAM.LEADER.STEPDOWN) until no two
// streams share a leader.
//
// Environment:
//   BENCH_PARTITIONS   partitions (default 64, BEACON_PARTITIONS' default)
//   BENCH_STREAMS      streams of the split row (default 3)
//   BENCH_IN_FLIGHT    appends in flight per appender (default 256)
//   BENCH_ENTRY_BYTES  bytes of one entry (default 200)
//   BENCH_DURATION_S   measured seconds per row (default 10)
//   BENCH_WARMUP_S     warm-up seconds per row (default 3)
//   BENCH_ROUNDS       times the two rows run, alternating (default 2)

import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { jetstreamManager } from '@nats-io/jetstream'
import { Changelog } from '../src/cluster/changelog.js'
import { spreadLeaders } from '../src/cluster/changelogs.js'
import { startNatsCluster, type NatsCluster } from '../test/helpers/nats-cluster.js'
import { cleanUpOnExit, track } from './children.js'
import { machineCpu, processCpu } from './proc-cpu.js'

const SCRIPT = fileURLToPath(import.meta.url)
const ROOT = fileURLToPath(new URL('..', import.meta.url))
const APPENDERS = 3

function intEnv (name: string, fallback: number): number {
  const raw = process.env[name]
  if (raw === undefined || raw === '') return fallback
  const value = Number(raw)
  if (!Number.isSafeInteger(value) || value < 1) throw new Error(`${name} must be a positive integer (got ${raw})`)
  return value
}

const PARTITIONS = intEnv('BENCH_PARTITIONS', 64)
const STREAMS = intEnv('BENCH_STREAMS', 3)
const IN_FLIGHT = intEnv('BENCH_IN_FLIGHT', 256)
const ENTRY_BYTES = intEnv('BENCH_ENTRY_BYTES', 200)
const DURATION_S = intEnv('BENCH_DURATION_S', 10)
const WARMUP_S = intEnv('BENCH_WARMUP_S', 3)
const ROUNDS = intEnv('BENCH_ROUNDS', 2)

/** What one appender child is told (argv[3], JSON). */
interface AppenderJob {
  urls: string[]
  /** Stream i holds the partitions p with p % streams === i. */
  streams: string[]
  prefix: string
  partitions: number[]
  inFlight: number
  entryBytes: number
  /** Date.now() at which to start and stop counting. */
  startAtMs: number
  stopAtMs: number
  owner: string
}

/** What it answers (its last stdout line, JSON). */
interface AppenderResult {
  appends: number
  messages: number
  failed: number
  cpuS: number
}

interface Row {
  streams: number
  leaders: string[]
  appendsPerS: number
  messagesPerS: number
  failed: number
  /** Cores (CPU s per s) of each nats-server, in cluster.names order. */
  natsCores: number[]
  appenderCores: number
  machineCores: number
  natsUsPerAppend: number
  appenderUsPerAppend: number
}

// ---------------------------------------------------------------------------------------------
// The appender child

async function appender (job: AppenderJob): Promise<void> {
  const nc = await connect({ servers: job.urls, reconnectTimeWait: 100, maxReconnectAttempts: -1 })
  const logs = await Promise.all(job.streams.map(stream => Changelog.open({ nc, stream, subjectPrefix: `${job.prefix}.${stream}`, replicas: 3, owner: job.owner })))
  const logOf = (partition: number): Changelog => logs[partition % logs.length]!
  for (const partition of job.partitions) await logOf(partition).claim(partition)
  const entry = { k: 'attrs', id: 'v'.repeat(16), at: 0, data: 'x'.repeat(Math.max(0, job.entryBytes - 60)) }
  let appends = 0
  let messages = 0
  let failed = 0
  let lastSeq = new Map<number, number>()
  let counting = false
  /** Cleared at the stop: every loop ends after its append in flight. */
  const state = { running: true }
  const loop = async (partition: number): Promise<void> => {
    const log = logOf(partition)
    while (state.running) {
      try {
        const seq = await log.append(partition, [entry])
        if (!counting) continue
        appends++
        if (lastSeq.get(partition) !== seq) {
          messages++
          lastSeq.set(partition, seq)
        }
      } catch {
        failed++
        if (!log.holds(partition)) await log.claim(partition)
      }
    }
  }
  const loops: Array<Promise<void>> = []
  for (let i = 0; i < job.inFlight; i++) loops.push(loop(job.partitions[i % job.partitions.length]!))
  const cpu = (): number => { const usage = process.cpuUsage(); return (usage.user + usage.system) / 1e6 }
  await new Promise(resolve => setTimeout(resolve, Math.max(0, job.startAtMs - Date.now())))
  counting = true
  lastSeq = new Map()
  const cpuStart = cpu()
  await new Promise(resolve => setTimeout(resolve, Math.max(0, job.stopAtMs - Date.now())))
  counting = false
  const cpuEnd = cpu()
  state.running = false
  await Promise.all(loops)
  await nc.close()
  const result: AppenderResult = { appends, messages, failed, cpuS: cpuEnd - cpuStart }
  process.stdout.write(`${JSON.stringify(result)}\n`)
}

// ---------------------------------------------------------------------------------------------
// The parent: cluster, streams, leaders, rows

/** The appenders' results, and the cores each nats-server and the whole machine were busy over the row. */
async function runAppenders (cluster: NatsCluster, streams: string[], prefix: string, round: number): Promise<{ results: AppenderResult[], natsCores: number[], machineCores: number }> {
  const startAtMs = Date.now() + 4000 + WARMUP_S * 1000
  const stopAtMs = startAtMs + DURATION_S * 1000
  const children = Array.from({ length: APPENDERS }, (_, i) => {
    const partitions: number[] = []
    for (let p = i; p < PARTITIONS; p += APPENDERS) partitions.push(p)
    const urls = [...cluster.urls.slice(i), ...cluster.urls.slice(0, i)]
    const job: AppenderJob = { urls, streams, prefix, partitions, inFlight: IN_FLIGHT, entryBytes: ENTRY_BYTES, startAtMs, stopAtMs, owner: `appender-${round}-${i}` }
    const child = track(spawn(process.execPath, ['--import', 'tsx', SCRIPT, 'appender', JSON.stringify(job)], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] }))
    let out = ''
    child.stdout!.on('data', (chunk: Buffer) => { out += chunk.toString('utf8') })
    return new Promise<AppenderResult>((resolve, reject) => child.once('close', code => {
      const last = out.trim().split('\n').pop() ?? ''
      if (code !== 0 || last === '') reject(new Error(`appender ${i} exited with ${String(code)}`))
      else resolve(JSON.parse(last) as AppenderResult)
    }))
  })
  const pids = cluster.servers.map(server => server.pid!)
  await new Promise(resolve => setTimeout(resolve, Math.max(0, startAtMs - Date.now())))
  const before = { nats: pids.map(processCpu), machine: machineCpu(), at: performance.now() }
  await new Promise(resolve => setTimeout(resolve, Math.max(0, stopAtMs - Date.now())))
  const after = { nats: pids.map(processCpu), machine: machineCpu(), at: performance.now() }
  const results = await Promise.all(children)
  const seconds = (after.at - before.at) / 1000
  return { results, natsCores: pids.map((_, i) => (after.nats[i]! - before.nats[i]!) / seconds), machineCores: (after.machine - before.machine) / seconds }
}

async function measureRow (cluster: NatsCluster, nc: NatsConnection, streamCount: number, round: number): Promise<Row> {
  const streams = Array.from({ length: streamCount }, (_, i) => `BENCH_CHANGELOG_${round}_${streamCount}_${i}`)
  const jsm = await jetstreamManager(nc, { timeout: 5000 })
  for (const stream of streams) await Changelog.open({ nc, stream, subjectPrefix: `bench.changelog.${stream}`, replicas: 3, owner: 'bench' })
  const leaders = streamCount > 1 ? await spreadLeaders(nc, streams, cluster.servers.length) : [(await jsm.streams.info(streams[0]!)).cluster?.leader ?? '']
  const { results, natsCores, machineCores } = await runAppenders(cluster, streams, 'bench.changelog', round)
  for (const stream of streams) await jsm.streams.delete(stream)
  const sum = (pick: (r: AppenderResult) => number): number => results.reduce((total, r) => total + pick(r), 0)
  const appends = sum(r => r.appends)
  const natsCpu = natsCores.reduce((a, b) => a + b, 0) * DURATION_S
  return {
    streams: streamCount,
    leaders,
    appendsPerS: appends / DURATION_S,
    messagesPerS: sum(r => r.messages) / DURATION_S,
    failed: sum(r => r.failed),
    natsCores,
    appenderCores: sum(r => r.cpuS) / DURATION_S,
    machineCores,
    natsUsPerAppend: appends === 0 ? 0 : natsCpu * 1e6 / appends,
    appenderUsPerAppend: appends === 0 ? 0 : sum(r => r.cpuS) * 1e6 / appends,
  }
}

/** One stream: its leader's CPU per message (µs), the figure a lone stream saturates on. */
function leaderUsPerMessage (row: Row, names: string[]): string {
  if (row.streams !== 1 || row.messagesPerS === 0) return '—'
  const leader = names.indexOf(row.leaders[0]!)
  return leader < 0 ? '?' : (row.natsCores[leader]! * 1e6 / row.messagesPerS).toFixed(1)
}

function format (row: Row, names: string[]): string {
  const short = (name: string): string => name.slice(name.lastIndexOf('-') + 1)
  const cores = row.natsCores.map((c, i) => `${short(names[i]!)} ${c.toFixed(2)}`).join(', ')
  return `| ${row.streams} | ${row.leaders.map(short).join(' ')} | ${Math.round(row.appendsPerS).toLocaleString('en-US')} | ${Math.round(row.messagesPerS).toLocaleString('en-US')} | ` +
    `${cores} | ${leaderUsPerMessage(row, names)} | ${row.appenderCores.toFixed(2)} | ${row.machineCores.toFixed(2)} | ${row.natsUsPerAppend.toFixed(1)} | ${row.appenderUsPerAppend.toFixed(1)} | ${row.failed} |`
}

/** The machine's load averages over 1, 5 and 15 minutes. */
function loadAverage (): string {
  return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')
}

async function main (): Promise<void> {
  cleanUpOnExit('bench:changelog')
  const load = loadAverage()
  console.log(`bench:changelog: ${PARTITIONS} partitions, ${APPENDERS} appenders × ${IN_FLIGHT} in flight, ${ENTRY_BYTES}-byte entries, ${DURATION_S} s per row after ${WARMUP_S} s warm-up; load average at start ${load}`)
  const cluster = await startNatsCluster()
  const nc = await connect({ servers: cluster.urls, reconnectTimeWait: 100, maxReconnectAttempts: -1 })
  const rows: Row[] = []
  try {
    console.log('| streams | leaders | appends/s | messages/s | nats-server cores | leader µs/message | appender cores | machine busy cores | NATS µs/append | appender µs/append | failed |')
    console.log('| ---: | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |')
    for (let round = 1; round <= ROUNDS; round++) {
      for (const streamCount of [1, STREAMS]) {
        const row = await measureRow(cluster, nc, streamCount, round)
        rows.push(row)
        console.log(format(row, cluster.names))
      }
    }
  } finally {
    await nc.close()
    await cluster.close()
  }
  const mean = (streams: number): number => {
    const of = rows.filter(row => row.streams === streams)
    return of.reduce((total, row) => total + row.appendsPerS, 0) / of.length
  }
  console.log(`S=${STREAMS} / S=1 appends/s: ${(mean(STREAMS) / mean(1)).toFixed(2)}× (target ≥ 1.6×); load average at end ${loadAverage()}`)
  if (rows.some(row => row.failed > 0)) process.exitCode = 1
}

if (process.argv[2] === 'appender') {
  appender(JSON.parse(process.argv[3]!) as AppenderJob).catch((error: unknown) => {
    console.error(error)
    process.exit(1)
  })
} else {
  main().catch((error: unknown) => {
    console.error(error)
    process.exit(1)
  })
}
