// `npm run bench:webhooks` (= node --import tsx bench/webhooks.ts): webhook deliveries per second to a
// local receiver, in one run:
//
//   - the baseline: a bare undici loop POSTing the very payloads Beacon renders, at concurrency 4 (a
//     delivery worker's in-flight bound, DELIVERY_LIMITS.inflightMaxDefault: the comparable one) and 64.
//     The one at 4 runs first and again after the transports: ratios are to the mean of the two, so
//     the machine's pace drifting during the run weighs on both sides alike; the scenario with a ratio
//     target (JetStream batchSize 1) has a baseline of its own, run right before and right after it;
//   - the embedded transport (LMDB outbox → in-process queue → delivery worker), batchSize 1 and 100;
//   - the JetStream transport (LMDB outbox → relay → JetStream stream on a real nats-server → durable
//     consumer → delivery worker → ack), batchSize 1 and 100;
//   - a native destination on the embedded transport: meta-capi (src/destinations), batches of up to
//     1,000 events a request into the same receiver (a batch waits up to a second to fill).
//
// The transports are driven in-process, without the HTTP front: a DeliveryHub over a Store in a temp
// dir, one account with one event webhook, and outbox rows appended straight into the Store (what a
// handled /campaigns/query does), so the numbers measure delivery. A producer keeps at most
// BENCH_BACKLOG rows appended but not yet delivered (a worker holds at most 10,000 items). The clock
// runs from the first delivery after a warm-up share of the rows to the last one. Every delivery is
// checked at the end: the receiver must have counted every item, with no retry or dead letter.
//
// The receiver is a separate process (node:http, counts items: 1 per object body, n per JSON array),
// each JetStream scenario gets a fresh nats-server (file storage in a temp dir) on a random port.
//
// Environment:
//   BENCH_ITEMS_1       deliveries per batchSize-1 scenario (default 20000)
//   BENCH_REQUESTS      requests per bare undici baseline (default 100000)
//   BENCH_ITEMS_100     deliveries per batchSize-100 scenario (default 200000)
//   BENCH_BACKLOG       rows appended but not yet delivered, at most (default 5000)
//   BENCH_ITEMS_DEST    deliveries of the meta-capi destination scenario (default 100000); its backlog is
//                       10,000 rows (a worker's queue), as a destination's batch waits up to a second to fill
//   BENCH_WARMUP        share of each scenario's items not timed (default 0.1)
//   BENCH_DURABILITY    flushed (default, Beacon's default) or committed
//   BENCH_ONLY          comma-separated scenario names (the baselines always run)
//   BENCH_STRICT=1      exit 1 when a target is missed

import { fork, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import http from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { randomUUID } from 'node:crypto'
import { Pool } from 'undici'
import { processCpu } from './proc-cpu.js'

const SELF = fileURLToPath(import.meta.url)

// -------------------------------------------------------------------------------------------------
// The receiver process: `bench/webhooks.ts --receiver`. Answers 200 with an empty body, counts items.

if (process.argv.includes('--receiver')) {
  let items = 0
  let requests = 0
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      requests++
      const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)
      // A JSON array is a webhook batch; {"data": [...]} a Meta Conversions API request (the destination row).
      items += body[0] === 0x5b ? (JSON.parse(body.toString('utf8')) as unknown[]).length : body[0] === 0x7b && body[2] === 0x64 ? (JSON.parse(body.toString('utf8')) as { data: unknown[] }).data.length : 1
      res.writeHead(200, { 'content-length': '0' })
      res.end()
    })
  })
  server.keepAliveTimeout = 60_000
  server.listen(0, '127.0.0.1', () => {
    process.send!({ port: (server.address() as { port: number }).port })
  })
  process.on('message', (message: { type: string }) => {
    if (message.type === 'count') process.send!({ items, requests })
    else if (message.type === 'reset') { items = 0; requests = 0; process.send!({ items, requests }) }
  })
  process.on('disconnect', () => process.exit(0))
}

// -------------------------------------------------------------------------------------------------

interface Result {
  name: string
  transport: 'undici' | 'embedded' | 'jetstream'
  batchSize: number
  concurrency: number
  items: number
  seconds: number
  perSecond: number
  /** CPU of this process and of nats-server over the timed part, in cores. */
  cpuSelf: number
  cpuNats: number | null
  /** CPU of the receiver process over the timed part, in cores. */
  cpuReceiver: number
  /** Items the receiver counted per request, over the whole scenario (warm-up included). */
  itemsPerRequest: number
  /** Event-loop utilization of this process's main thread over the timed part (1 = never idle). */
  elu: number
  ratio?: number
  /** The baseline this result's ratio is to, when it has one of its own (measured right around it). */
  baseline?: number
  target?: string
  met?: boolean
  problems: string[]
}

async function main (): Promise<void> {
  // Imported here so the receiver process loads nothing of Beacon.
  const { Store } = await import('../src/store/store.js')
  const { Catalogs } = await import('../src/catalog/catalogs.js')
  const { deliveryTargets } = await import('../src/catalog/delivery-targets.js')
  const { Listeners } = await import('../src/listeners.js')
  const { DeliveryHub } = await import('../src/delivery/hub.js')
  const { EmbeddedQueue } = await import('../src/delivery/embedded-queue.js')
  const { JetStreamQueue } = await import('../src/delivery/jetstream/queue.js')
  const { compileWebhook, renderRequest, DELIVERY_LIMITS } = await import('../src/webhooks/index.js')
  const { startNatsServer } = await import('../test/helpers/nats-server.js')
  const { systemClock } = await import('../src/clock.js')
  type DeliveryQueue = import('../src/delivery/queue.js').DeliveryQueue
  type DeliveryRecord = import('../src/delivery/record.js').DeliveryRecord
  type OutboxRow = import('../src/store/record-codec.js').OutboxRow

  const ITEMS_1 = intEnv('BENCH_ITEMS_1', 20_000)
  const ITEMS_100 = intEnv('BENCH_ITEMS_100', 200_000)
  const ITEMS_DEST = intEnv('BENCH_ITEMS_DEST', 100_000)
  const REQUESTS = intEnv('BENCH_REQUESTS', 100_000)
  const BACKLOG = intEnv('BENCH_BACKLOG', 5_000)
  const WARMUP = Number(process.env.BENCH_WARMUP ?? '0.1')
  const DURABILITY = (process.env.BENCH_DURABILITY ?? 'flushed') as 'flushed' | 'committed'
  const ONLY = (process.env.BENCH_ONLY ?? '').split(',').map(s => s.trim()).filter(s => s !== '')
  const BASE_CONCURRENCY = DELIVERY_LIMITS.inflightMaxDefault
  const TARGET_B100 = 50_000
  const TARGET_B1_RATIO = 0.5

  const children: ChildProcess[] = []
  const killAll = (): void => { for (const child of children) { try { child.kill('SIGKILL') } catch {} } }
  process.once('exit', killAll)
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.once(signal, () => { killAll(); process.exit(130) })

  // The receiver.
  const receiverProc = fork(SELF, ['--receiver'], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  children.push(receiverProc)
  const port = await new Promise<number>(resolve => receiverProc.once('message', (m: { port: number }) => resolve(m.port)))
  const receiverUrl = `http://127.0.0.1:${port}`
  const ask = (type: 'count' | 'reset'): Promise<{ items: number, requests: number }> => new Promise(resolve => {
    receiverProc.once('message', resolve as (m: unknown) => void)
    receiverProc.send({ type })
  })

  const ACCOUNT = '7d1f0c3e-2b4a-4e6f-9a8b-1c2d3e4f5a6b'
  const webhookConfig = (batchSize: number): Record<string, unknown> => ({
    name: 'bench', enabled: true,
    trigger: { kind: 'event', events: ['purchase'] },
    request: { method: 'POST', url: `${receiverUrl}/hook` },
    delivery: { mode: 'async', timeoutMs: 10_000, batchSize },
  })
  let orderSeq = 0
  const row = (): OutboxRow => {
    orderSeq++
    return {
      kind: 'event', account: ACCOUNT, event: 'purchase', visitorId: randomUUID(),
      fields: { orderId: `o-${orderSeq}`, orderTotal: 10 + (orderSeq % 90), currency: 'EUR', attributes: { plan: 'pro' } },
      occurredAtMs: Date.now(),
    }
  }

  const destinationRow = (): OutboxRow => {
    const r = row()
    r.fields = { ...r.fields, userAgent: 'Mozilla/5.0 (bench)', path: '/checkout/done' }
    return r
  }

  const results: Result[] = []
  const wanted = (name: string): boolean => ONLY.length === 0 || ONLY.includes(name)

  // --- Baselines: bare undici, the same payloads, pre-rendered. ---------------------------------------
  const compiled = compileWebhook('bench', ACCOUNT, webhookConfig(1), { allowPrivate: true })
  const payloads = Array.from({ length: 1000 }, (_, i) => {
    const r = row()
    const id = `${i + 1}.bench`
    const rendered = renderRequest(compiled, [{ id, occurredAtMs: r.occurredAtMs as number, context: { account: ACCOUNT, visitorId: r.visitorId as string, event: 'purchase', eventFields: r.fields as Record<string, unknown> } }])
    return {
      body: rendered.body!,
      headers: [...rendered.headers, 'webhook-id', id, 'webhook-timestamp', String(Math.floor(Date.now() / 1000))],
    }
  })
  const bare = async (concurrency: number, name: string): Promise<Result> => {
    const pool = new Pool(receiverUrl, { connections: concurrency })
    const total = REQUESTS
    const warm = Math.floor(total * WARMUP)
    let next = 0
    let done = 0
    let failed = 0
    let t0 = 0
    let cpu0 = process.cpuUsage()
    let elu0 = performance.eventLoopUtilization()
    let receiver0 = processCpu(receiverProc.pid!)
    const loop = async (): Promise<void> => {
      while (next < total) {
        next++
        const payload = payloads[next % payloads.length]!
        const res = await pool.request({ method: 'POST', path: '/hook', headers: payload.headers, body: payload.body })
        await res.body.dump()
        if (res.statusCode !== 200) failed++
        if (++done === warm) { t0 = performance.now(); cpu0 = process.cpuUsage(); elu0 = performance.eventLoopUtilization(); receiver0 = processCpu(receiverProc.pid!) }
      }
    }
    await ask('reset')
    await Promise.all(Array.from({ length: concurrency }, loop))
    const seconds = (performance.now() - t0) / 1000
    const cpu = process.cpuUsage(cpu0)
    const elu = performance.eventLoopUtilization(elu0).utilization
    const cpuReceiver = (processCpu(receiverProc.pid!) - receiver0) / seconds
    await pool.close()
    const result: Result = {
      name, transport: 'undici', batchSize: 1, concurrency, items: total - warm, seconds, perSecond: (total - warm) / seconds,
      cpuSelf: (cpu.user + cpu.system) / 1e6 / seconds, cpuNats: null, cpuReceiver, itemsPerRequest: 1, elu, problems: failed > 0 ? [`${failed} non-200 answers`] : [],
    }
    results.push(result)
    log(`${name}: ${Math.round(result.perSecond)} req/s`)
    return result
  }
  await bare(BASE_CONCURRENCY, `bare undici concurrency ${BASE_CONCURRENCY}, before`)
  await bare(64, 'bare undici concurrency 64')
  let baseline = results[0]!.perSecond

  // --- Transports. ---------------------------------------------------------------------------------
  interface Scenario { name: string, transport: 'embedded' | 'jetstream', batchSize: number, items: number, destination?: boolean }
  const scenarios: Scenario[] = [
    { name: 'embedded batchSize 1', transport: 'embedded', batchSize: 1, items: ITEMS_1 },
    { name: 'embedded batchSize 100', transport: 'embedded', batchSize: 100, items: ITEMS_100 },
    { name: 'JetStream batchSize 1', transport: 'jetstream', batchSize: 1, items: ITEMS_1 },
    { name: 'JetStream batchSize 100', transport: 'jetstream', batchSize: 100, items: ITEMS_100 },
    // A native destination (src/destinations): meta-capi, batches of up to 1,000 events into the receiver.
    { name: 'embedded meta-capi destination', transport: 'embedded', batchSize: 1000, items: ITEMS_DEST, destination: true },
  ]

  for (const scenario of scenarios) {
    if (!wanted(scenario.name)) continue
    const ratioTarget = scenario.transport === 'jetstream' && scenario.batchSize === 1
    const right = ratioTarget ? await bare(BASE_CONCURRENCY, `bare undici concurrency ${BASE_CONCURRENCY}, right before`) : null
    const dir = mkdtempSync(join(tmpdir(), 'beacon-bench-webhooks-'))
    const nats = scenario.transport === 'jetstream' ? await startNatsServer() : null
    const natsPid = nats?.pid ?? null
    const outboxAppended = new Listeners<import('../src/store/store.js').OutboxAppended>()
    const store = new Store({ path: dir, durability: DURABILITY, outboxAppended })
    // The account first: the catalogs load the accounts when they are made.
    await store.save(store.accounts, ACCOUNT, { account: ACCOUNT, name: 'bench', suspended: false, createdAt: new Date().toISOString() })
    const webhookChanged = new Listeners<import('../src/webhooks/lookup.js').WebhookChanged>()
    const catalogs = new Catalogs({ store, clock: systemClock, segmentsChanged: new Listeners(), webhookChanged, allowPrivateWebhooks: true })
    if (scenario.destination === true) {
      await catalogs.destinations.put(ACCOUNT, 'meta', {
        type: 'meta-capi', name: 'bench', enabled: true, events: ['purchase'], credentials: { accessToken: 'bench-token' },
        settings: { pixelId: '1234567890', apiBaseUrl: receiverUrl, siteUrl: 'https://shop.example' },
      })
    } else {
      await catalogs.webhooks.put(ACCOUNT, 'bench', webhookConfig(scenario.batchSize))
    }

    const inner: DeliveryQueue = scenario.transport === 'embedded'
      ? new EmbeddedQueue(store)
      : await JetStreamQueue.connect({ url: nats!.url, log: quietLog })
    let delivered = 0
    let retried = 0
    let dead = 0
    const counting: DeliveryQueue = {
      retriesInMemory: inner.retriesInMemory,
      start: (feed) => inner.start(feed),
      publish: (records: readonly DeliveryRecord[], encoded?: readonly Uint8Array[]) => inner.publish(records, encoded),
      settle (record, outcome, delayMs) {
        if (outcome === 'delivered') delivered++
        else if (outcome === 'retry') retried++
        else dead++
        inner.settle(record, outcome, delayMs)
      },
      stop: () => inner.stop(),
    }
    const hub = new DeliveryHub({ store, registry: deliveryTargets(catalogs.webhooks, catalogs.destinations), webhookChanged, outboxAppended, clock: systemClock, allowPrivate: true, queue: counting })
    await ask('reset')
    await hub.start()

    const total = scenario.items
    const warm = Math.floor(total * WARMUP)
    let appended = 0
    let t0 = 0
    let cpu0 = process.cpuUsage()
    let elu0 = performance.eventLoopUtilization()
    let nats0 = natsPid === null ? 0 : processCpu(natsPid)
    let receiver0 = processCpu(receiverProc.pid!)
    const startedMs = Date.now()
    const timeoutMs = 120_000
    // eslint-disable-next-line no-unmodified-loop-condition -- the receiver's callbacks count them while this loop sleeps
    while (delivered + dead < total) {
      if (t0 === 0 && delivered >= warm) {
        t0 = performance.now()
        cpu0 = process.cpuUsage()
        elu0 = performance.eventLoopUtilization()
        nats0 = natsPid === null ? 0 : processCpu(natsPid)
        receiver0 = processCpu(receiverProc.pid!)
      }
      const room = Math.min((scenario.destination === true ? 10_000 : BACKLOG) - (appended - delivered - dead), total - appended)
      // Website events need a user agent and a page for Meta: the destination's rows carry them.
      for (let i = 0; i < room; i++) store.appendOutbox(scenario.destination === true ? destinationRow() : row())
      appended += Math.max(0, room)
      if (Date.now() - startedMs > timeoutMs) break
      await new Promise(resolve => setTimeout(resolve, 1))
    }
    const seconds = (performance.now() - t0) / 1000
    const cpu = process.cpuUsage(cpu0)
    const elu = performance.eventLoopUtilization(elu0).utilization
    const natsCpu = natsPid === null ? null : (processCpu(natsPid) - nats0) / seconds
    const cpuReceiver = (processCpu(receiverProc.pid!) - receiver0) / seconds
    const problems: string[] = []
    if (delivered + dead < total) problems.push(`timed out: ${delivered} of ${total} delivered`)
    if (retried > 0) problems.push(`${retried} retries`)
    if (dead > 0) problems.push(`${dead} dead letters`)
    // The receiver saw every item?
    const deadline = Date.now() + 5000
    let seen = await ask('count')
    while (seen.items < total && Date.now() < deadline) {
      await new Promise(resolve => setTimeout(resolve, 50))
      seen = await ask('count')
    }
    if (seen.items < total) problems.push(`the receiver counted ${seen.items} of ${total} items`)
    await hub.stop()
    await store.close()
    rmSync(dir, { recursive: true, force: true })
    await nats?.close()

    const items = total - warm
    const result: Result = {
      name: scenario.name, transport: scenario.transport, batchSize: scenario.batchSize, concurrency: DELIVERY_LIMITS.inflightMaxDefault,
      items, seconds, perSecond: items / seconds, cpuSelf: (cpu.user + cpu.system) / 1e6 / seconds, cpuNats: natsCpu, cpuReceiver, itemsPerRequest: seen.items / Math.max(1, seen.requests), elu, problems,
    }
    if (scenario.transport === 'jetstream' && scenario.batchSize === 100) {
      result.target = `≥ ${TARGET_B100.toLocaleString('en')}/s`
      result.met = result.perSecond >= TARGET_B100 && problems.length === 0
    }
    results.push(result)
    if (right !== null) {
      const after = await bare(BASE_CONCURRENCY, `bare undici concurrency ${BASE_CONCURRENCY}, right after`)
      result.baseline = (right.perSecond + after.perSecond) / 2
      result.target = `≥ ${TARGET_B1_RATIO} × baseline right around it`
      result.met = result.perSecond / result.baseline >= TARGET_B1_RATIO && problems.length === 0
    }
    log(`${scenario.name}: ${Math.round(result.perSecond)} deliveries/s${problems.length > 0 ? ' — ' + problems.join('; ') : ''}`)
  }

  await bare(BASE_CONCURRENCY, `bare undici concurrency ${BASE_CONCURRENCY}, after`)
  baseline = (baseline + results[results.length - 1]!.perSecond) / 2
  for (const r of results) r.ratio = r.perSecond / (r.baseline ?? baseline)
  process.stdout.write('\n' + table(results) + '\n\n')
  process.stdout.write(`baseline = bare undici at concurrency ${BASE_CONCURRENCY} (a worker's in-flight bound), the mean of the runs before and after the transports (a row with a baseline of its own: the mean of those right before and after it); durability ${DURABILITY}; backlog ≤ ${BACKLOG} rows\n`)
  const missed = results.filter(r => r.met === false)
  for (const r of missed) process.stdout.write(`MISSED: ${r.name}: ${Math.round(r.perSecond)}/s, target ${r.target}${r.problems.length > 0 ? ' (' + r.problems.join('; ') + ')' : ''}\n`)
  const failed = results.filter(r => r.problems.length > 0)
  process.stdout.write('BENCH_JSON=' + JSON.stringify({
    bench: 'webhooks', durability: DURABILITY, backlog: BACKLOG, baselinePerSecond: Math.round(baseline),
    results: results.map(r => ({ ...r, perSecond: Math.round(r.perSecond), ratio: Number(r.ratio!.toFixed(3)), seconds: Number(r.seconds.toFixed(3)), cpuSelf: Number(r.cpuSelf.toFixed(2)), elu: Number(r.elu.toFixed(2)), cpuNats: r.cpuNats === null ? null : Number(r.cpuNats.toFixed(2)), cpuReceiver: Number(r.cpuReceiver.toFixed(2)), itemsPerRequest: Number(r.itemsPerRequest.toFixed(1)) })),
  }) + '\n')
  receiverProc.disconnect()
  if (failed.length > 0 || (process.env.BENCH_STRICT === '1' && missed.length > 0)) process.exitCode = 1
}

function table (results: Result[]): string {
  const head = ['scenario', 'batch', 'items/request', 'in flight', 'deliveries/s', 'ratio', 'loop busy', 'CPU node', 'CPU nats', 'CPU receiver', 'target', 'met']
  const rows = results.map(r => [
    r.name, String(r.batchSize), r.itemsPerRequest.toFixed(1), String(r.concurrency), Math.round(r.perSecond).toLocaleString('en'), r.ratio!.toFixed(2) + '×',
    Math.round(r.elu * 100) + '%', r.cpuSelf.toFixed(2), r.cpuNats === null ? '—' : r.cpuNats.toFixed(2), r.cpuReceiver.toFixed(2), r.target ?? '—', r.met === undefined ? '—' : r.met ? 'yes' : 'NO',
  ])
  const widths = head.map((h, c) => Math.max(h.length, ...rows.map(row => row[c]!.length)))
  const numeric = new Set([1, 2, 3, 4, 5, 6, 7, 8, 9])
  const fmt = (row: string[]): string => '| ' + row.map((cell, c) => numeric.has(c) ? cell.padStart(widths[c]!) : cell.padEnd(widths[c]!)).join(' | ') + ' |'
  return [fmt(head), '|' + widths.map((w, c) => numeric.has(c) ? '-'.repeat(w + 1) + ':' : '-'.repeat(w + 2)).join('|') + '|', ...rows.map(fmt)].join('\n')
}

const quietLog = { debug () {}, info () {}, warn (o: object, m?: string) { log(`warn: ${m ?? ''} ${JSON.stringify(o)}`) }, error (o: object, m?: string) { log(`error: ${m ?? ''} ${JSON.stringify(o)}`) } }

function log (line: string): void {
  process.stderr.write(line + '\n')
}

function intEnv (name: string, fallback: number): number {
  const raw = process.env[name]
  if (raw === undefined || raw === '') return fallback
  const n = Number(raw)
  if (!Number.isInteger(n) || n <= 0) throw new Error(`${name} must be a positive whole number`)
  return n
}

if (!process.argv.includes('--receiver')) await main()
