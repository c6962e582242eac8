// Prometheus metrics (prom-client), one registry per server so two Beacons in one process (tests)
// never share counters.
//
// The request path touches only pre-bound children: each route gets its histogram child and a small
// map status → counter child when the server is built, so a request costs two prom-client updates
// (measured: about 0.6 µs together, against about 36 µs of server CPU per /campaigns/query). Everything
// else is read at scrape time by collect() callbacks: actors from the runtime's counters, LMDB from
// its stats. Nothing is computed for a metric nobody scrapes.

import { statSync } from 'node:fs'
import { join } from 'node:path'
import { constants, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks'
import { getHeapStatistics } from 'node:v8'
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client'
import type { RouteInfo, RouteObserver } from '../http/server.js'

/** Latency buckets of HTTP requests, in seconds: fine around the 10 ms p99 target, coarse beyond. */
export const HTTP_DURATION_BUCKETS_S = [0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]
/** LMDB write latency buckets, in seconds (a 4 KiB fdatasync is 0.1–1 ms on a good disk). */
export const COMMIT_DURATION_BUCKETS_S = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1]
/** Takeover buckets, in seconds: a lease time (3 s by default) plus a recovery. */
export const TAKEOVER_DURATION_BUCKETS_S = [0.1, 0.25, 0.5, 1, 1.5, 2, 3, 4, 5, 7.5, 10, 15, 30, 60]
/** Changelog append buckets, in seconds: a quorum acknowledgement on a LAN, up to a leader election. */
export const APPEND_DURATION_BUCKETS_S = [0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5, 10]
/** Webhook request latency buckets, in seconds (timeouts go up to 60 s). */
export const DELIVERY_DURATION_BUCKETS_S = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

export const CONTENT_TYPE = Registry.PROMETHEUS_CONTENT_TYPE

/** What the metrics read of the actor runtime (ActorRuntime fits). */
export interface RuntimeStats {
  readonly residentCount: number
  readonly activations: number
  readonly passivations: number
  /** Messages waiting in all mailboxes. */
  readonly mailboxDepth: number
}

interface LmdbStats {
  pageSize?: number
  lastPageNumber?: number
  mapSize?: number
  entryCount?: number
}

interface StatsDb { getStats (): object }

/** What the metrics read of the store (Store fits). */
export interface StoreStats {
  readonly isOpen: boolean
  readonly root: StatsDb
  readonly outbox: StatsDb
  readonly visitors: StatsDb
  readonly profiles: StatsDb
  readonly deliveries: StatsDb
  readonly members: StatsDb
}

export interface MetricsSources {
  runtime: RuntimeStats
  store: StoreStats
  /** The LMDB folder (BEACON_DATA_DIR), for the size of data.mdb on disk. */
  dataDir: string
}

/** Webhook delivery outcomes as counted: a 2xx, an attempt to retry, and a delivery given up (dead letter). */
export const DELIVERY_OUTCOMES = ['delivered', 'retry', 'dead'] as const
export type DeliveryOutcome = typeof DELIVERY_OUTCOMES[number]

type Child = { inc: () => void }

export class Metrics {
  readonly registry: Registry
  readonly httpRequests: Counter<'route' | 'method' | 'status'>
  readonly httpDuration: Histogram<'route' | 'method'>
  readonly actorsResident: Gauge
  readonly actorActivations: Counter
  readonly actorPassivations: Counter
  readonly mailboxMessages: Gauge
  /** Registered on the first observation (the store's commit hook: see observeCommitMs). */
  readonly lmdbCommitDuration: Histogram
  readonly lmdbMapBytes: Gauge
  readonly lmdbUsedBytes: Gauge
  readonly lmdbFileBytes: Gauge
  readonly lmdbEntries: Gauge<'db'>
  readonly outboxRows: Gauge
  /** Registered on the first delivery recorded (the delivery hub's hook: see recordDelivery). */
  readonly webhookDeliveries: Counter<'outcome'>
  readonly webhookDeliveryDuration: Histogram<'outcome'>
  /** Registered on the first batch a native destination sends (see recordDestination). */
  readonly destinationItems: Counter<'type' | 'destination' | 'outcome'>
  /** Registered on the first state reported (the NATS subsystem: see setNatsConnected). */
  readonly natsConnected: Gauge
  readonly heapLiveBytes: Gauge
  /** Cluster mode only (registered by watchCluster). */
  readonly clusterTakeovers: Counter
  readonly clusterTakeoverDuration: Histogram
  readonly clusterAppendDuration: Histogram
  readonly clusterForwarded: Counter
  readonly visitorsExpired: Counter

  constructor ({ runtime, store, dataDir }: MetricsSources) {
    const registry = this.registry = new Registry()
    const registers = [registry]
    collectDefaultMetrics({ register: registry })

    this.httpRequests = new Counter({
      name: 'beacon_http_requests_total', help: 'HTTP requests answered, by route pattern, method and status (499: client went away).',
      labelNames: ['route', 'method', 'status'], registers,
    })
    this.httpDuration = new Histogram({
      name: 'beacon_http_request_duration_seconds', help: 'Time from a request\'s headers to its answer, by route pattern and method.',
      labelNames: ['route', 'method'], buckets: HTTP_DURATION_BUCKETS_S, registers,
    })

    this.actorsResident = new Gauge({
      name: 'beacon_actors_resident', help: 'Visitor and profile actors in memory.', registers,
      collect () { this.set(runtime.residentCount) },
    })
    this.actorActivations = monotonic('beacon_actor_activations_total', 'Actors activated (state read from LMDB).', () => runtime.activations, registers)
    this.actorPassivations = monotonic('beacon_actor_passivations_total', 'Actors passivated (idle or over BEACON_ACTORS_MAX).', () => runtime.passivations, registers)
    this.mailboxMessages = new Gauge({
      name: 'beacon_actor_mailbox_messages', help: 'Messages waiting in actor mailboxes.',
      registers,
      collect () { this.set(runtime.mailboxDepth) },
    })

    this.lmdbCommitDuration = new Histogram({
      name: 'beacon_lmdb_commit_duration_seconds', help: 'Time from a transaction\'s first write being issued to it being durable (BEACON_DURABILITY), once a transaction.',
      buckets: COMMIT_DURATION_BUCKETS_S, registers: [],
    })
    const dataFile = join(dataDir, 'data.mdb')
    const rootStats = (): LmdbStats => store.isOpen ? store.root.getStats() as LmdbStats : {}
    this.lmdbMapBytes = new Gauge({
      name: 'beacon_lmdb_map_size_bytes', help: 'LMDB map size (grows by itself).', registers,
      collect () { this.set(rootStats().mapSize ?? 0) },
    })
    this.lmdbUsedBytes = new Gauge({
      name: 'beacon_lmdb_used_bytes', help: 'LMDB pages in use (up to the last page written), in bytes.', registers,
      collect () {
        const stats = rootStats()
        this.set(((stats.lastPageNumber ?? -1) + 1) * (stats.pageSize ?? 0))
      },
    })
    this.lmdbFileBytes = new Gauge({
      name: 'beacon_lmdb_file_bytes', help: 'Size of data.mdb on disk.', registers,
      collect () { this.set(fileBytes(dataFile)) },
    })
    const dbs = { visitors: store.visitors, profiles: store.profiles, outbox: store.outbox, deliveries: store.deliveries, members: store.members }
    this.lmdbEntries = new Gauge({
      name: 'beacon_lmdb_entries', help: 'Records per LMDB database.', labelNames: ['db'], registers,
      collect () {
        if (!store.isOpen) return
        for (const [db, handle] of Object.entries(dbs)) this.set({ db }, (handle.getStats() as LmdbStats).entryCount ?? 0)
      },
    })
    this.outboxRows = new Gauge({
      name: 'beacon_outbox_rows', help: 'Outbox rows not yet relayed to webhook deliveries (the relay\'s backlog).', registers,
      collect () { this.set(store.isOpen ? (store.outbox.getStats() as LmdbStats).entryCount ?? 0 : 0) },
    })

    this.destinationItems = new Counter({
      name: 'beacon_destination_items_total', help: 'Items native destinations handled, by type, destination (account/id) and outcome (delivered, retry, terminal, skipped).',
      labelNames: ['type', 'destination', 'outcome'], registers: [],
    })
    this.webhookDeliveries = new Counter({
      name: 'beacon_webhook_deliveries_total', help: 'Webhook delivery attempts by outcome (delivered, retry, dead).',
      labelNames: ['outcome'], registers: [],
    })
    this.webhookDeliveryDuration = new Histogram({
      name: 'beacon_webhook_delivery_duration_seconds', help: 'Webhook request latency by outcome.',
      labelNames: ['outcome'], buckets: DELIVERY_DURATION_BUCKETS_S, registers: [],
    })
    this.visitorsExpired = new Counter({ name: 'beacon_visitors_expired_total', help: 'Anonymous visitors erased for inactivity (BEACON_VISITOR_RETENTION_DAYS).', registers })
    this.natsConnected = new Gauge({ name: 'beacon_nats_connected', help: '1 while connected to NATS, else 0.', registers: [] })
    this.clusterTakeovers = new Counter({ name: 'beacon_cluster_takeovers_total', help: 'Takeovers: partitions whose lease this node took after it saw an earlier lease of the partition (another node\'s, or its own) released or lapsed, counted once the partition is recovered and owned here (a recovery that failed is not counted, nor a partition\'s first lease in a new cluster).', registers: [] })
    this.clusterTakeoverDuration = new Histogram({
      name: 'beacon_cluster_takeover_seconds', help: 'From the previous lease of a partition seen gone (released or lapsed) to the partition recovered and owned here.',
      buckets: TAKEOVER_DURATION_BUCKETS_S, registers: [],
    })
    this.clusterAppendDuration = new Histogram({
      name: 'beacon_cluster_changelog_append_seconds', help: 'From sending a partition changelog message (one or more entity writes) to JetStream\'s acknowledgement.',
      buckets: APPEND_DURATION_BUCKETS_S, registers: [],
    })
    this.clusterForwarded = new Counter({ name: 'beacon_cluster_forwarded_total', help: 'Requests this node forwarded to the owner of their partition.', registers: [] })
    watchFullCollections()
    this.heapLiveBytes = new Gauge({
      name: 'beacon_heap_live_bytes',
      help: 'JS heap in use just after the last full (mark-compact) collection: the live objects, without the garbage the heap total also holds.',
      registers,
      collect () { this.set(heapLiveBytes) },
    })
  }

  /** The observer of one route's requests (ServerOptions.observe): its label values bound once, here. */
  observeRoute (route: RouteInfo): RouteObserver {
    const method = route.method === 'any' ? 'other' : route.method === 'del' ? 'DELETE' : route.method.toUpperCase()
    const duration = this.httpDuration.labels(route.pattern, method)
    const requests = this.httpRequests
    const byStatus = new Map<number, Child>()
    return (status, durationMs) => {
      let child = byStatus.get(status)
      if (child === undefined) {
        child = requests.labels(route.pattern, method, String(status))
        byStatus.set(status, child)
      }
      child.inc()
      duration.observe(durationMs / 1000)
    }
  }

  /** For the store's commit hook: one durable write took this long. */
  readonly observeCommitMs = (durationMs: number): void => {
    this.registerOnce(this.lmdbCommitDuration)
    this.lmdbCommitDuration.observe(durationMs / 1000)
  }

  /** For the delivery hub: one attempt's outcome and latency. */
  readonly recordDelivery = (outcome: DeliveryOutcome, latencyMs: number): void => {
    this.registerOnce(this.webhookDeliveries)
    this.registerOnce(this.webhookDeliveryDuration)
    this.webhookDeliveries.labels(outcome).inc()
    this.webhookDeliveryDuration.labels(outcome).observe(latencyMs / 1000)
  }

  /** A native destination's batch: its items by outcome. */
  readonly recordDestination = (type: string, destination: string, outcome: string, items: number): void => {
    this.registerOnce(this.destinationItems)
    this.destinationItems.labels(type, destination, outcome).inc(items)
  }

  /** For the NATS subsystem: the connection went up or down. */
  readonly setNatsConnected = (connected: boolean): void => {
    this.registerOnce(this.natsConnected)
    this.natsConnected.set(connected ? 1 : 0)
  }

  /** Cluster mode: registers the cluster metrics, the partitions owned read from the node at each scrape. */
  watchCluster (node: { ownedCount (): number }): void {
    this.registerOnce(this.clusterTakeovers)
    this.registerOnce(this.clusterTakeoverDuration)
    this.registerOnce(this.clusterAppendDuration)
    this.registerOnce(this.clusterForwarded)
    this.registry.registerMetric(new Gauge({
      name: 'beacon_cluster_partitions_owned', help: 'Partitions this node has recovered and serves.', registers: [],
      collect () { this.set(node.ownedCount()) },
    }))
  }

  /** Cluster mode: the forwarder's batches, read at each scrape (beacon_cluster_forwarded_total over it: requests a batch). */
  watchForwarder (forwarder: { batchesSent: number }): void {
    this.registry.registerMetric(new Counter({
      name: 'beacon_cluster_forward_batches_total', help: 'Batches of forwarded requests this node sent, one NATS message each (BEACON_FORWARD_BATCH).', registers: [],
      collect () {
        this.reset()
        this.inc(forwarder.batchesSent)
      },
    }))
  }

  /** Cluster mode: one partition taken over in this long. */
  readonly recordTakeover = (durationMs: number): void => {
    this.clusterTakeovers.inc()
    this.clusterTakeoverDuration.observe(durationMs / 1000)
  }

  /** Cluster mode: one changelog message acknowledged this long after it was sent. */
  readonly observeChangelogAppendMs = (durationMs: number): void => {
    this.clusterAppendDuration.observe(durationMs / 1000)
  }

  /** Anonymous visitors erased by the retention. */
  readonly countVisitorsExpired = (count: number): void => {
    this.visitorsExpired.inc(count)
  }

  /** Cluster mode: one request forwarded to its partition's owner. */
  readonly countForwarded = (): void => {
    this.clusterForwarded.inc()
  }

  /** The exposition text (GET /metrics). */
  text (): Promise<string> {
    return this.registry.metrics()
  }

  /** Metrics registered so far among those that appear on first use (a Set: a commit pays one lookup). */
  private readonly registered = new Set<object>()

  private registerOnce (metric: Counter<string> | Gauge<string> | Histogram<string>): void {
    if (this.registered.has(metric)) return
    this.registered.add(metric)
    this.registry.registerMetric(metric)
  }
}

/** A counter mirroring a count kept elsewhere: at each scrape it is advanced by what the source grew. */
function monotonic (name: string, help: string, read: () => number, registers: Registry[]): Counter {
  let seen = 0
  return new Counter({
    name, help, registers,
    collect () {
      const now = read()
      if (now > seen) this.inc(now - seen)
      seen = now
    },
  })
}

/** The heap used just after the last full collection (0 before the first), for the process: one observer. */
let heapLiveBytes = 0
let gcObserver: PerformanceObserver | null = null

function watchFullCollections (): void {
  if (gcObserver !== null) return
  gcObserver = new PerformanceObserver(list => {
    // The entries come after the collection, in a later task: the heap has grown a little since.
    for (const entry of list.getEntries()) {
      if ((entry as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) heapLiveBytes = getHeapStatistics().used_heap_size
    }
  })
  gcObserver.observe({ entryTypes: ['gc'] })
}

function fileBytes (path: string): number {
  try {
    return statSync(path).size
  } catch {
    return 0
  }
}
