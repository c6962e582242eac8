// `npm run chaos -- --minutes N --seed S`: a Jepsen-style test of a whole Beacon cluster. It starts 3 NATS
// servers (JetStream, R3) and 3 Beacon nodes (the built dist/) on loopback and a webhook sink (a local
// HTTP server recording every delivery), runs concurrent clients through random nodes
// (test/chaos/clients.ts) while a seeded nemesis kills, pauses and restarts nodes and NATS servers
// (test/chaos/nemesis.ts), records everything to an NDJSON history (test/chaos/history.ts), then heals
// the cluster, reads every key back through every node, waits for the webhooks and checks the history
// (test/chaos/checker.ts). The last line printed is the summary object; the exit code is 0 only when
// every check holds. Every process and temp folder it started is removed at the end, on an error, and
// on Ctrl-C (SIGINT) or SIGTERM.
//
// `--check <history.ndjson>` checks a history file written earlier, without starting anything.

import { parseArgs } from 'node:util'
import { mkdirSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { ADMIN_KEY, admin, type Tenant } from '../helpers/beacon.js'
import { CLUSTER_LEASE_MS, CLUSTER_PARTITIONS, startBeaconCluster, type BeaconCluster } from '../helpers/beacon-cluster.js'
import { startReceiver, type Receiver, type Received } from '../webhooks/helpers.js'
import { check, describeAnomalies, summaryOf, type Verdict } from './checker.js'
import { Clients, sleep } from './clients.js'
import { History, readHistory, type Entry, type Value } from './history.js'
import { FAULTS, Nemesis, type Fault } from './nemesis.js'
import { Rng } from './rng.js'

const { values: flags } = parseArgs({
  options: {
    minutes: { type: 'string', default: '3' },
    seed: { type: 'string' },
    history: { type: 'string' },
    concurrency: { type: 'string', default: '12' },
    check: { type: 'string' },
    faults: { type: 'string' },
    'changelog-streams': { type: 'string', default: '1' },
  },
})

const REQUEST_TIMEOUT_MS = 15_000
/** Check 5: how long the healed cluster has to own every partition, and each node to answer. */
const SETTLE_MS = 60_000
const ANSWER_MS = 10_000
/** How long acknowledged writes' webhooks may take to arrive once the faults stopped. */
const WEBHOOK_DRAIN_MS = 120_000
/** After the last expected webhook, how long the sink keeps listening for late duplicates. */
const WEBHOOK_LINGER_MS = 5_000
const FINAL_READ_TRIES = 10
const START_TRIES = 3
const WEBHOOK_ID = 'chaos'
const PAYLOAD = '{"event": {{event}}, "visitorId": {{visitorId}}, "profileId": {{profileId}}, "orderId": {{event.orderId}}, "attributes": {{event.attributes}}}'

if (flags.check !== undefined) {
  const entries = readHistory(flags.check)
  const verdict = check(entries)
  for (const line of describeAnomalies(verdict, entries)) console.log(line)
  console.log(JSON.stringify(summaryOf(verdict, Number(flags.seed ?? NaN), Number(flags.minutes))))
  process.exit(verdict.ok ? 0 : 1)
}

const minutes = Number(flags.minutes)
if (!(minutes > 0)) throw new Error(`--minutes: expected a number above 0, got ${flags.minutes}`)
const seed = flags.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(flags.seed)
if (!Number.isInteger(seed) || seed < 0) throw new Error(`--seed: expected a whole number from 0, got ${flags.seed}`)
const concurrency = Number(flags.concurrency)
const faults = (flags.faults?.split(',') ?? [...FAULTS]) as Fault[]
for (const fault of faults) if (!FAULTS.includes(fault)) throw new Error(`--faults: expected a comma-separated list of ${FAULTS.join(', ')}; got ${fault}`)
const artifacts = resolve('.artifacts/chaos')
const historyPath = resolve(flags.history ?? join(artifacts, `history-${seed}.ndjson`))

const log = (line: string): void => { console.log(`[chaos ${new Date().toISOString().slice(11, 19)}] ${line}`) }
const history = new History(historyPath)
const rng = new Rng(seed)

let cluster: BeaconCluster | undefined
let starting: Promise<BeaconCluster> | undefined
let sink: Receiver | undefined
let clients: Clients | undefined
let nemesis: Nemesis | undefined
let cleaned: Promise<void> | undefined

/** Every process and temp folder of the run gone: idempotent, and safe at any point of the run. */
function cleanup (): Promise<void> {
  cleaned ??= (async () => {
    nemesis?.unwatch()
    cluster ??= await starting?.catch(() => undefined)
    await cluster?.close().catch((error: Error) => log(`closing the cluster: ${error.message}`))
    await sink?.close().catch(() => {})
    await history.close()
  })()
  return cleaned
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    log(`${signal}: stopping, removing every process and temp folder`)
    void cleanup().finally(() => process.exit(130))
  })
}

try {
  const verdict = await run()
  process.exitCode = verdict.ok ? 0 : 1
} catch (error) {
  log(`the run failed: ${String((error as Error).stack ?? error)}`)
  await cleanup()
  console.log(JSON.stringify({ ok: false, seed, minutes, error: String((error as Error).message ?? error) }))
  process.exitCode = 2
}

async function run (): Promise<Verdict> {
  log(`seed ${seed}, ${minutes} min of faults, ${concurrency} clients; history: ${historyPath}`)
  sink = await startReceiver(received => {
    history.add(deliveryOf(received))
    return { status: 200 }
  })
  cluster = await startCluster()
  const { tenant } = cluster
  await createWebhook(cluster, tenant, sink.url)
  history.add({
    type: 'nemesis', time: history.now(), action: 'setup', target: cluster.name,
    detail: JSON.stringify({
      account: tenant.account, partitions: CLUSTER_PARTITIONS, leaseMs: CLUSTER_LEASE_MS, nats: cluster.nats.names,
      nodes: cluster.members.map(member => ({ id: member.id, folderId: member.folderId })),
      // Epoch milliseconds of history time 0: node logs carry epoch times.
      epochMsAtZero: Date.now() - history.now(),
    }),
  })
  log(`cluster up: NATS ${cluster.nats.names.join(', ')}; nodes ${cluster.members.map(member => `${member.id} ${member.url}`).join(', ')}`)

  const running = cluster
  clients = new Clients({
    history, tenant, rng: rng.fork(), concurrency, visitors: 60, profiles: 20, timeoutMs: REQUEST_TIMEOUT_MS, tag: String(seed),
    nodes: () => running.members.map(member => ({ id: member.id, url: member.process === null ? null : member.process.url })),
  })
  nemesis = new Nemesis(cluster, history, rng.fork(), CLUSTER_LEASE_MS, faults)
  const deadline = Date.now() + minutes * 60_000
  clients.start(deadline)
  nemesis.start(deadline)
  const progress = setInterval(() => log(`${history.entries.filter(entry => entry.type === 'invoke').length} operations so far`), 30_000)
  try {
    await nemesis.finished()
    await sleep(Math.max(0, deadline - Date.now()))
  } finally {
    clearInterval(progress)
  }
  await nemesis.stop()
  await clients.stop()
  log(`faults stopped (${Object.entries(nemesis.counts).map(([fault, n]) => `${n} ${fault}`).join(', ')}); healing`)
  await nemesis.heal()

  await healthCheck(cluster)
  await finalReads(cluster, clients)
  await drainWebhooks()

  const verdict = check(history.entries)
  if (!verdict.ok) {
    for (const line of describeAnomalies(verdict, history.entries)) console.log(line)
    const logs = join(dirname(historyPath), `logs-${seed}`)
    mkdirSync(logs, { recursive: true })
    for (const member of cluster.members) writeFileSync(join(logs, `${member.id}.log`), nemesis.logsOf(member.id) + (member.process?.output() ?? ''))
    for (const [i, server] of cluster.nats.servers.entries()) writeFileSync(join(logs, `${cluster.nats.names[i]}.log`), server.output())
    log(`the nodes' and NATS servers' logs: ${logs}`)
  }
  describeOutcomes(history.entries)
  await cleanup()
  log(`history: ${historyPath}`)
  console.log(JSON.stringify(summaryOf(verdict, seed, minutes)))
  return verdict
}

/**
 * The cluster, started again (up to START_TRIES times) when a node does not start within the harness's
 * 15 s or it does not settle within a minute: on a loaded machine a first start can be that slow, and
 * the run is about faults, not about the first start (each failed try is printed).
 */
async function startCluster (): Promise<BeaconCluster> {
  for (let attempt = 1; ; attempt++) {
    starting = startBeaconCluster(3, { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true', BEACON_CHANGELOG_STREAMS: flags['changelog-streams'] })
    const started = await starting.catch((error: Error) => error)
    starting = undefined
    if (!(started instanceof Error)) {
      cluster = started
      const settled = await started.settled().then(() => null, (error: Error) => error)
      if (settled === null) return started
      await started.close()
      cluster = undefined
      if (attempt === START_TRIES) throw settled
      log(`start ${attempt} of ${START_TRIES}: ${settled.message.slice(0, 500)}; starting again`)
    } else {
      if (attempt === START_TRIES) throw started
      log(`start ${attempt} of ${START_TRIES}: ${started.message.slice(0, 500)}; starting again`)
    }
  }
}

async function createWebhook (cluster: BeaconCluster, tenant: Tenant, sinkUrl: string): Promise<void> {
  const path = `/admin/accounts/${tenant.account}/webhooks/${WEBHOOK_ID}`
  const created = await admin(cluster.members[0]!.url, 'PUT', path, {
    name: 'chaos sink', enabled: true, trigger: { kind: 'event', events: ['purchase', 'attributesUpdated'] },
    request: { method: 'POST', url: `${sinkUrl}/hook`, payload: PAYLOAD },
    delivery: { mode: 'async', timeoutMs: 5000, batchSize: 1, maxAttempts: 50 },
  })
  if (created.status !== 200 && created.status !== 201) throw new Error(`creating the webhook: ${created.status} ${JSON.stringify(created.body)}`)
  for (const member of cluster.members) {
    const deadline = Date.now() + 10_000
    while ((await admin(member.url, 'GET', path)).status !== 200) {
      if (Date.now() > deadline) throw new Error(`the webhook is not on ${member.id} 10 s after its creation`)
      await sleep(50)
    }
  }
}

/** A delivery the sink received, as the key and value of the write it reports. */
function deliveryOf (received: Received): Entry {
  const webhookId = String(received.headers['webhook-id'] ?? '')
  const time = history.now()
  let body: { event?: string, visitorId?: string | null, profileId?: string | null, orderId?: string | null, attributes?: Record<string, Value> | null } = {}
  try {
    body = JSON.parse(received.body)
  } catch {}
  if (body.event === 'purchase') return { type: 'webhook', time, webhookId, key: `orders:${body.visitorId}`, value: String(body.orderId) }
  if (body.event === 'attributesUpdated' && body.attributes?.v !== undefined) return { type: 'webhook', time, webhookId, key: `v:${body.visitorId}`, value: body.attributes.v }
  if (body.event === 'attributesUpdated' && body.attributes?.p !== undefined) return { type: 'webhook', time, webhookId, key: `p:${body.profileId}`, value: body.attributes.p }
  return { type: 'webhook', time, webhookId, key: 'unrecognized', value: received.body.slice(0, 300) }
}

/**
 * Check 5's evidence: within SETTLE_MS of the heal, every node answers GET /admin/cluster and a read
 * within ANSWER_MS each, has joined, and sees every partition owned by a running node, none recovering
 * and no node holding more than its share. One health entry per node: its state when all held, or its last problem.
 */
async function healthCheck (cluster: BeaconCluster): Promise<void> {
  const deadline = Date.now() + SETTLE_MS
  const startedMs = Date.now()
  for (;;) {
    const states = await Promise.all(cluster.members.map(async member => ({ member, problem: await nodeProblem(cluster, member) })))
    const allOk = states.every(state => state.problem === null)
    if (allOk || Date.now() > deadline) {
      for (const { member, problem } of states) {
        history.add({ type: 'health', time: history.now(), node: member.id, ok: problem === null, detail: problem ?? `every partition owned, answered within ${ANSWER_MS} ms, ${Date.now() - startedMs} ms after the heal` })
      }
      log(allOk ? `check 5: every node answers, every partition owned (${Date.now() - startedMs} ms after the heal)` : `check 5 failed: ${states.filter(state => state.problem !== null).map(state => `${state.member.id}: ${state.problem}`).join('; ')}`)
      return
    }
    await sleep(250)
  }
}

async function nodeProblem (cluster: BeaconCluster, member: BeaconCluster['members'][number]): Promise<string | null> {
  if (member.process === null) return 'not running (its restarts failed)'
  const running = new Set(cluster.members.filter(other => other.process !== null).map(other => other.id))
  const started = Date.now()
  try {
    const res = await fetch(`${member.url}/admin/cluster`, { headers: { authorization: `Bearer ${ADMIN_KEY}` }, signal: AbortSignal.timeout(ANSWER_MS) })
    const body = await res.json() as { joined: boolean, unowned: number[], recovering: number[], nodes: Array<{ id: string, partitions: number[] }> }
    if (res.status !== 200) return `GET /admin/cluster answered ${res.status}`
    if (!body.joined) return 'not joined'
    if (body.unowned.length > 0) return `${body.unowned.length} partitions without owner: ${body.unowned.join(',')}`
    if (body.recovering.length > 0) return `recovering ${body.recovering.length} partitions`
    const owned = new Set<number>()
    for (const node of body.nodes) {
      for (const partition of node.partitions) {
        if (!running.has(node.id)) return `partition ${partition} held by ${node.id}, not running`
        owned.add(partition)
      }
    }
    if (owned.size !== CLUSTER_PARTITIONS) return `${CLUSTER_PARTITIONS - owned.size} partitions without a lease holder`
    // The balancer's share (src/cluster/balancer.ts): a node holding more than it once the others are
    // back (a survivor keeping every partition) has not given back what it took during the faults.
    const share = Math.ceil(CLUSTER_PARTITIONS / running.size)
    const heavy = body.nodes.find(node => node.partitions.length > share)
    if (heavy !== undefined) return `${heavy.id} holds ${heavy.partitions.length} partitions, more than its share of ${share}`
    const { account, token } = cluster.tenant
    const read = await fetch(`${member.url}/visitors/query`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ account, token, visitorId: clients!.visitors[0]!.id }),
      signal: AbortSignal.timeout(Math.max(1, ANSWER_MS - (Date.now() - started))),
    })
    await read.text()
    if (read.status !== 200) return `a read answered ${read.status}`
    return null
  } catch (error) {
    return `no answer within ${ANSWER_MS} ms (${String((error as Error).name)})`
  }
}

/** Every visitor and profile read back through every running node (again after a 503, up to FINAL_READ_TRIES times). */
async function finalReads (cluster: BeaconCluster, clients: Clients): Promise<void> {
  const jobs = cluster.members.filter(member => member.process !== null).flatMap(member => [
    ...clients.visitors.map(visitor => ({ member, key: `visitor:${visitor.id}`, read: () => clients.visitorRead(member.url, visitor.id, 'admin') })),
    ...clients.profiles.map(profile => ({ member, key: `profile:${profile.id}`, read: () => clients.profileRead(member.url, profile.id) })),
  ])
  let next = 0
  await Promise.all(Array.from({ length: 8 }, async () => {
    while (next < jobs.length) {
      const job = jobs[next++]!
      let last = ''
      for (let attempt = 1; attempt <= FINAL_READ_TRIES; attempt++) {
        const outcome = await job.read()
        if (outcome.type === 'ok') {
          history.add({ type: 'final', time: history.now(), node: job.member.id, key: job.key, read: outcome.read! })
          last = ''
          break
        }
        last = `${outcome.status ?? ''} ${outcome.code ?? outcome.error ?? ''}`.trim()
        await sleep(1000)
      }
      if (last !== '') history.add({ type: 'final', time: history.now(), node: job.member.id, key: job.key, error: last })
    }
  }))
  log(`final reads: ${jobs.length} (${clients.visitors.length} visitors and ${clients.profiles.length} profiles through ${jobs.length / (clients.visitors.length + clients.profiles.length)} nodes)`)
}

/** Until every acknowledged write's webhook arrived (or WEBHOOK_DRAIN_MS passed), then WEBHOOK_LINGER_MS more. */
async function drainWebhooks (): Promise<void> {
  const expected = new Set<string>()
  const invokes = new Map<number, Entry & { type: 'invoke' }>()
  for (const entry of history.entries) {
    if (entry.type === 'invoke') invokes.set(entry.op, entry)
    if (entry.type !== 'ok') continue
    const invoke = invokes.get(entry.op)!
    if (invoke.f === 'add' || (invoke.f === 'write' && /^(v|p):/.test(invoke.key))) expected.add(`${invoke.key}=${String(invoke.value)}`)
  }
  const startedMs = Date.now()
  const missing = (): number => {
    const arrived = new Set(history.entries.flatMap(entry => entry.type === 'webhook' ? [`${entry.key}=${String(entry.value)}`] : []))
    return [...expected].filter(id => !arrived.has(id)).length
  }
  while (missing() > 0 && Date.now() - startedMs < WEBHOOK_DRAIN_MS) await sleep(500)
  await sleep(WEBHOOK_LINGER_MS)
  log(`webhooks: ${expected.size} acknowledged writes, ${missing()} without a delivery after ${Date.now() - startedMs} ms; ${sink!.requests.length} requests received`)
}

/** One line per kind of answer: how the operations ended (informative; the checks are the verdict). */
function describeOutcomes (entries: Entry[]): void {
  const counts = new Map<string, number>()
  for (const entry of entries) {
    if (entry.type !== 'ok' && entry.type !== 'fail' && entry.type !== 'info') continue
    const what = `${entry.type}${entry.status === undefined ? '' : ` ${entry.status}`}${entry.code === undefined ? '' : ` ${entry.code}`}${entry.error === undefined || entry.status !== undefined ? '' : ` ${entry.error}`}`
    counts.set(what, (counts.get(what) ?? 0) + 1)
  }
  log(`answers: ${[...counts].sort((a, b) => b[1] - a[1]).map(([what, n]) => `${n} ${what}`).join(', ')}`)
}
