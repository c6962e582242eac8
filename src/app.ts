// Beacon assembled: store → catalogs → actors → HTTP, webhooks through the embedded or the JetStream
// queue. `startBeacon` is what main.ts and the benchmarks run; `stop` is the graceful shutdown: stop
// accepting and answer the requests in flight, wait for their writes, finish the relay pass under way
// (rows not yet relayed stay in the outbox for the next start), stop the delivery workers (what they
// had not sent stays pending, or goes back to the stream), close NATS, then flush and close LMDB.
// With BEACON_CLUSTER the process is also a cluster node (src/cluster-mode.ts): it joins before it
// listens, and hands its partitions over right after the requests in flight were answered.

import { peopleRoutes } from './http/people-routes.js'
import { PeopleScan } from './jobs/people-scan.js'
import { redactUrl, type Config } from './config.js'
import { systemClock, type Clock } from './clock.js'
import { Store, type DurableObserved, type OutboxAppended } from './store/store.js'
import { IdempotencyRecords, sweepIdempotency, type IdempotencySwept } from './store/idempotency.js'
import { Listeners } from './listeners.js'
import { LinksBackfill } from './store/links-backfill.js'
import { Catalogs } from './catalog/catalogs.js'
import { deliveryTargets } from './catalog/delivery-targets.js'
import { UndiciProviderHttp } from './destinations/http.js'
import type { SegmentsChanged } from './catalog/segments.js'
import type { WebhookChanged } from './webhooks/lookup.js'
import { HttpServer } from './http/server.js'
import type { RouteDefinition } from './http/route.js'
import { publicRoutes } from './http/public-routes.js'
import { trustedProxySet } from './http/client-address.js'
import { adminRoutes } from './http/admin-routes.js'
import { destinationRoutes } from './http/destination-routes.js'
import { sdkRoutes } from './http/sdk-routes.js'
import { panelRoutes } from './http/panel-routes.js'
import { ActorRuntime } from '../actors/runtime.js'
import { visitorKind } from '../actors/visitor.js'
import { profileKind } from '../actors/profile.js'
import { log } from './log.js'
import { SegmentMaintenance } from './jobs/segment-maintenance.js'
import { SegmentBackfills, thisProcess, timeOrdered } from './jobs/segment-backfill.js'
import { ClusterBackfillNodes, streamOrdered } from './jobs/cluster-backfills.js'
import { DeliveryHub } from './delivery/hub.js'
import { ClusterDeliveries } from './delivery/cluster-history.js'
import { ClusterErasures } from './delivery/cluster-erasures.js'
import { Erasure } from './jobs/erasure.js'
import { ProfileLinks } from './store/profile-links.js'
import { AccountDeletions } from './jobs/account-deletion.js'
import { VisitorRetention, type RetentionOutcome } from './jobs/visitor-retention.js'
import type { SegmentSet } from './segments/segment-set.js'
import { JetStreamQueue } from './delivery/jetstream/queue.js'
import type { JetStreamQueueOptions } from './delivery/jetstream/options.js'
import { Metrics } from './ops/metrics.js'
import { opsRoutes, withOpenApi } from './ops/ops-routes.js'
import { requestObservers } from './ops/request-log.js'
import { Users } from './users/users.js'
import { Sessions } from './users/sessions.js'
import { AuditLog } from './audit/audit-log.js'
import { Access } from './http/access.js'
import { protectAdminRoutes } from './http/protect.js'
import { userRoutes } from './http/user-routes.js'
import { auditRoutes } from './http/audit-routes.js'
import { LocalMediaStore, type MediaStore } from './media/media-store.js'
import { mediaRoutes } from './http/media-routes.js'
import { tryRoutes } from './http/try-routes.js'
import { localBuckets } from './reports/report.js'
import { BanditReweighting } from './jobs/bandit-reweighting.js'
import { reportRoutes } from './http/report-routes.js'
import { ReportCounters } from './reports/counters.js'
import { ClusterReports } from './reports/cluster-reports.js'
import { ClusterAudit } from './audit/cluster-audit.js'
import { AccountLimits } from './http/account-limits.js'
import { openClusterMode, type ClusterMode } from './cluster-mode.js'
import { clusterRoutes } from './http/cluster-routes.js'
import { RouteHint } from './http/route-hint.js'
import { EVENT_TRIM_EVERY_MS, EventLog, trimEventLog, type EventAppender, type EventStore } from './store/event-log.js'
import { eventLogRoutes } from './http/event-log-routes.js'
import { Replays, type ReplayService, type ReplaySource } from './jobs/replay.js'
import { ClusterReplays } from './jobs/cluster-replays.js'
import { replayRoutes } from './http/replay-routes.js'
import { SavedReportIndex } from './reports/saved-index.js'
import { compactSavedReports, oldestLogged, SavedResults } from './reports/saved-results.js'
import { ReportDeliveries } from './catalog/report-deliveries.js'
import { loadSavedReports } from './reports/saved-load.js'
import { feedSavedReports } from './reports/saved-stream-feed.js'
import { savedReportRoutes } from './http/saved-report-routes.js'
import { ImportJobs, type ImportService } from './jobs/import-jobs.js'
import { ClusterImports } from './jobs/cluster-imports.js'
import { importRoutes } from './http/import-routes.js'
import { importRowParser } from './http/import-rows.js'
import { join } from 'node:path'

export interface Beacon {
  port: number
  /** Every route served, as assembled (admin routes with their guard and role): tests walk it. */
  routes: readonly RouteDefinition[]
  /** The LMDB store (for tools and in-process tests that inspect the outbox). */
  store: Store
  deliveries: DeliveryHub
  /** Evaluate now the entities whose segment windows expired (the periodic sweep, on demand: tests). */
  sweepSegments (): Promise<number>
  /** Run the schedule webhooks and saved report deliveries that are due (the periodic tick, on demand: tests). */
  runSchedules (): Promise<number>
  /** Fold the report counters into the store now (the periodic fold, on demand: tests). */
  foldReports (): Promise<void>
  /** Reweight the bandit experiments now (the periodic pass, on demand: tests). */
  reweightBandits (): Promise<void>
  /** Delete the delivered records past their retention (the periodic pass, on demand: tests). */
  pruneDeliveries (): Promise<number>
  /** Erase the anonymous visitors inactive past their retention (the periodic pass, on demand: tests). */
  sweepInactiveVisitors (): Promise<RetentionOutcome>
  /** This data folder's event log (docs/event-log.md); null when it keeps none (cluster mode: the cluster's stream; retention 0). */
  events: EventLog | null
  stop (): Promise<void>
}

export interface StartOptions {
  config: Config
  adminKey: string
  clock?: Clock
}

export async function startBeacon ({ config, adminKey, clock = systemClock }: StartOptions): Promise<Beacon> {
  // Who hears what: each list is given to its teller here and joined below as the listeners are built
  // (the delivery hub joins its own while it runs).
  const outboxAppended = new Listeners<OutboxAppended>()
  const durableObserved = new Listeners<DurableObserved>()
  const segmentsChanged = new Listeners<SegmentsChanged>()
  const webhookChanged = new Listeners<WebhookChanged>()
  const idempotencySwept = new Listeners<IdempotencySwept>()
  const store = new Store({
    path: config.dataDir, durability: config.durability, mapSizeBytes: config.mapSizeBytes, secretsKey: config.secretsKey, outboxAppended, durableObserved,
  })
  const runtime = new ActorRuntime({ clock, actorsMax: config.actorsMax, actorIdleMs: config.actorIdleMs, mailboxMax: config.mailboxMax })
  const metrics = config.metrics ? new Metrics({ runtime, store, dataDir: config.dataDir }) : null
  // Native destinations (src/destinations) send through their own client, SSRF-guarded as webhooks are.
  const destinationHttp = new UndiciProviderHttp(config.webhookAllowPrivate)
  const catalogs = new Catalogs({
    store, clock, segmentsChanged, webhookChanged, allowPrivateWebhooks: config.webhookAllowPrivate, destinationHttp,
    observeDestinations: metrics === null ? null : (destination, outcome, items) => metrics.recordDestination(destination.config.type, `${destination.account}/${destination.id}`, outcome, items),
  })
  if (metrics !== null) durableObserved.add(metrics.observeCommitMs)
  // Cluster mode (BEACON_CLUSTER): this process is a node owning partitions; visitors and profiles write
  // through their partition's changelog (src/cluster-mode.ts). Null in the embedded mode.
  const cluster: ClusterMode | null = config.cluster === null
    ? null
    : await openClusterMode({
      config, store, clock, runtime, outboxAppended, idempotencySwept, metrics, relayedThrough: (): number => deliveries.relayedThrough, relaySettled: () => deliveries.settled(),
      syncTimeoutMs: account => catalogs.webhooks.syncTimeoutMs(account),
    })
  const segments = (account: string): SegmentSet => catalogs.segments.compiledSet(account)
  // Outbox rows are written for what a webhook or a native destination selects, carrying the attributes either reads.
  const wantsEvent = (account: string, type: string): boolean => catalogs.webhooks.wantsEvent(account, type) || catalogs.destinations.wantsEvent(account, type)
  const wantsChange = (account: string, change: 'enter' | 'exit' | 'erase', segment: string): boolean =>
    catalogs.webhooks.wantsChange(account, change, segment) || catalogs.destinations.wantsChange(account, change, segment)
  const listsMembers = (account: string, segment: string): boolean => catalogs.webhooks.listsMembers(account, segment)
  const attributesWanted = (account: string): ReadonlySet<string> => unionOf(catalogs.webhooks.attributeNames(account), catalogs.destinations.attributeNames(account))
  const reports = new ReportCounters({
    store, clock, foldMs: config.reportFoldMs, hasCampaign: (account, id) => catalogs.campaigns.has(account, id),
    onError: error => log.error({ err: error }, 'report fold failed'),
    // Cluster mode: each node's member count is its signed share, the cluster's sum floored (cluster-reports.ts).
    signedMembers: cluster !== null,
  })
  // BEACON_REPORTS=false: nothing is counted (reports and member counts stay as last folded).
  const membership = config.reports ? reports.membership : null
  const writes = cluster?.entityLog ?? null
  // Idempotency-Key answers, written with the writes they answer; expired ones swept in the background.
  const idempotency = new IdempotencyRecords(store, idempotencySwept)
  const stopIdempotencySweep = sweepIdempotency(idempotency, () => clock.nowMs(), error => log.error({ err: error }, 'Idempotency-Key sweep failed'))
  // The retained event log (docs/event-log.md): this folder's (src/store/event-log.ts), trimmed in the
  // background to its retention and size cap; in cluster mode the cluster's JetStream stream
  // (src/cluster/event-stream.ts), which JetStream trims.
  const localEvents = cluster !== null || config.eventRetentionDays === 0
    ? null
    : new EventLog(store, { retentionMs: config.eventRetentionDays * 86_400_000, sizeMaxBytes: config.eventLogMaxBytes })
  const events: (EventStore & ReplaySource) | null = cluster === null ? localEvents : cluster.events
  const stopEventTrim = localEvents === null ? null : trimEventLog(localEvents, () => clock.nowMs(), error => log.error({ err: error }, 'event log trim failed'))
  // Saved reports read the log's events as in-memory columns (src/reports/saved-index.ts). Embedded mode:
  // loaded in the background from here (saved-load.ts), the server serving meanwhile, and fed each
  // appended event and each erasure (queued for an account the load has not finished). Cluster mode:
  // every node's columns hold the whole cluster's log, fed from its stream (saved-stream-feed.ts).
  const clusterEvents = cluster?.events ?? null
  const savedIndex = events === null ? null : new SavedReportIndex()
  const onSavedLoaded = (rows: number, ms: number): void => { if (rows > 0) log.info({ events: rows, ms }, 'saved reports: event log loaded') }
  const stopSavedLoad = localEvents === null || savedIndex === null
    ? null
    : loadSavedReports({
      index: savedIndex, events: store.events, upToSeq: localEvents.lastSeq, onLoaded: onSavedLoaded,
      onError: error => log.error({ err: error }, 'saved reports: loading the event log failed (results answer 503 until a restart)'),
    })
  const savedFeed = clusterEvents === null || savedIndex === null
    ? null
    : feedSavedReports({
      index: savedIndex, events: clusterEvents, everyMs: EVENT_TRIM_EVERY_MS, onLoaded: onSavedLoaded,
      onError: error => log.error({ err: error }, 'saved reports: reading the event stream failed'),
    })
  if (savedIndex !== null) catalogs.savedReports.accountForgotten = account => savedIndex.removeAccount(account)
  const savedResults = savedIndex === null
    ? null
    : new SavedResults({ index: savedIndex, oldestKeptMs: savedFeed === null ? oldestLogged(store) : () => savedFeed.firstTimeMs(), clock, retentionMs: config.eventRetentionDays * 86_400_000 })
  // The columns follow the log's trims (their memory is the retention window's, read or not).
  const stopSavedCompaction = savedResults === null
    ? null
    : compactSavedReports(savedResults, EVENT_TRIM_EVERY_MS, error => log.error({ err: error }, 'saved reports: compaction failed'))
  const appendEvent: EventAppender | null = clusterEvents !== null
    ? (account, visitorId, profileId, event, nowMs, segments, dedupeKey) => clusterEvents.append(account, visitorId, profileId, event, nowMs, segments, dedupeKey)
    : localEvents === null || savedIndex === null
      ? null
      // The columns are fed the row the log stored (added after this event turn: saved-index.ts).
      : (account, visitorId, profileId, event, nowMs, segments) => savedIndex.addRow(account, nowMs, localEvents.appendRow(account, visitorId, profileId, event, nowMs, segments))
  const eventErasure: Pick<EventStore, 'forget'> | null = clusterEvents !== null
    ? clusterEvents
    : localEvents === null || savedIndex === null
      ? null
      : {
          forget: (account, visitors, profiles) => {
            savedIndex.forget(account, visitors, profiles)
            return localEvents.forget(account, visitors, profiles)
          },
        }
  const profiles = profileKind({ store, segments, clock, wantsEvent, wantsChange, listsMembers, attributesWanted, membership, writes, idempotency })
  const visitors = visitorKind({
    store, runtime, profiles, campaigns: account => catalogs.campaigns.compiledSet(account), segments, clock, wantsEvent, wantsChange, listsMembers, attributesWanted, membership, writes, idempotency, peers: cluster?.actors ?? null,
    experiments: config.reports ? reports : null, holdout: account => catalogs.accounts.holdoutOf(account), eventLog: appendEvent,
  })
  cluster?.actors.serve([visitors, profiles])
  const maintenance = new SegmentMaintenance({
    store, catalogs, runtime, visitors, profiles, clock, sweepMs: config.segmentSweepMs,
    // Cluster mode: sweeps and passes touch only the partitions this node owns.
    owns: cluster?.ownsKey ?? null,
  })
  segmentsChanged.add((account, version) => maintenance.startPass(account, version))
  // Segment backfills over the event log (docs/event-log.md, "Backfilling a segment"); their holds come
  // back with the catalog's rows, before any traffic. Cluster mode: every node holds them, each runs on
  // the node that took its save, over the cluster's stream (src/jobs/cluster-backfills.ts).
  const entitiesIdle = (account: string): Promise<void> => maintenance.idle(account)
  const backfills = events === null
    ? null
    : new SegmentBackfills({
      store, segments: catalogs.segments, actors: cluster?.actors ?? runtime, visitors, clock,
      source: cluster?.events != null ? streamOrdered(cluster.events) : timeOrdered(localEvents!),
      nodes: cluster === null ? thisProcess(entitiesIdle) : new ClusterBackfillNodes({ calls: cluster.calls, nodeId: cluster.calls.nodeId, segments: catalogs.segments, clock, entitiesIdle }),
      accountActive: account => catalogs.accounts.active(account) !== undefined,
      onError: error => log.error({ err: error }, 'segment backfill failed'),
      settleMs: config.backfillSettleMs,
    })
  maintenance.start()
  // Cluster mode: outcomes of attempts go back to the node holding each record (its data folder id) through the queue's outcome stream;
  // erasures of a person's delivery records reach every node through its erasure stream.
  const outcomes = cluster === null || config.cluster === null ? null : { cluster: config.cluster, holder: store.nodeId, replicas: config.replicas }
  const erasureStream = outcomes === null ? null : { cluster: outcomes.cluster, node: store.nodeId, replicas: config.replicas }
  const queue = config.natsUrl === null ? null : await connectNats(config.natsUrl, config.nodeId ?? store.nodeId, metrics?.setNatsConnected, { access: config.natsAuth, ackPendingMax: config.natsAckPendingMax, ackWaitMs: config.natsAckWaitMs, outcomes, erasures: erasureStream })
  const targets = deliveryTargets(catalogs.webhooks, catalogs.destinations)
  const deliveries: DeliveryHub = new DeliveryHub({
    store, registry: targets, webhookChanged, outboxAppended, clock, allowPrivate: config.webhookAllowPrivate, onAttempt: (outcome, latencyMs, account, count) => {
      metrics?.recordDelivery(outcome, latencyMs)
      if (config.reports) reports.delivery(account, outcome, latencyMs, count)
    }, membersReady: account => maintenance.idle(account),
    retentionMs: config.deliveryRetentionMs,
    ...(queue === null ? {} : { queue }),
    cluster: cluster === null ? null : { ...cluster.deliveries, outcomes: queue?.outcomes ?? null },
    relayGate: cluster?.relayGate ?? null,
    // Saved reports with a delivery (docs/reports.md): embedded mode with a retained log only.
    ...(savedResults === null ? {} : { reports: new ReportDeliveries(catalogs.savedReports, savedResults) }),
  })
  await deliveries.start()
  // Replays of the event log to one target (docs/event-log.md, "Replay"): resumed where a stop left them.
  // Cluster mode: they read the cluster's stream, each on the node that started it, read through any.
  const replays = events === null
    ? null
    : new Replays({
      store, events, deliveries, clock, inflightMax: config.replayInflightMax,
      target: (account, key) => targets.webhook(account, key),
      accountActive: account => catalogs.accounts.active(account) !== undefined,
      onError: error => log.error({ err: error }, 'event log replay failed'),
      nodeId: cluster?.calls.nodeId ?? null, idOrigin: cluster?.deliveries.idOrigin ?? null,
    })
  replays?.start()
  const replayService: ReplayService | null = replays === null || cluster === null ? replays : new ClusterReplays(replays, cluster.calls, cluster.calls.nodeId)
  // Cluster mode: the deliveries log lists and replays every node's records (each node serves its own).
  const clusterDeliveries = cluster === null ? null : new ClusterDeliveries({ hub: deliveries, calls: cluster.calls })
  // Cluster mode: erasing a person removes their delivery records on every node, one down at the time
  // included (src/delivery/cluster-erasures.ts); so do the saved reports' columns (each node holds the
  // whole cluster's log).
  const erasedHere = cluster === null || savedIndex === null
    ? deliveries
    : {
        forget: (account: string, profileIds: ReadonlySet<string>, visitorIds: ReadonlySet<string>) => {
          savedIndex.forget(account, visitorIds, profileIds)
          return deliveries.forget(account, profileIds, visitorIds)
        },
      }
  const clusterErasures = queue?.erasures == null ? null : new ClusterErasures({ hub: erasedHere, transport: queue.erasures })
  clusterErasures?.start()
  // Cluster mode: accounts the replicated configuration removes before the deletions exist (below).
  const removedAccounts: Array<{ account: string, name: string }> = []
  if (cluster !== null) catalogs.accountRemoved = (account, name) => { removedAccounts.push({ account, name }) }
  const sessions = new Sessions(store, clock, config.sessionTtlMs)
  const users = new Users(store, clock, sessions)
  // Cluster mode: the panel's users and sessions are the cluster's (docs/internals/cluster.md, "Panel users and sessions").
  if (cluster !== null) await cluster.start(catalogs, { users, sessions })
  // Once this node applies events (cluster mode: once it joined).
  backfills?.start()
  const linksBackfill = new LinksBackfill(store)
  linksBackfill.start()
  const accountDeletions = new AccountDeletions({
    store, catalogs, clock, entitiesIdle: account => maintenance.idle(account), forgetUsers: account => users.removeAccount(account),
    // Cluster mode: visitors and profiles are erased through their partitions' owners (the changelog knows).
    cluster: cluster === null
      ? null
      : {
          owns: cluster.ownsKey,
          erase: (kind, account, id) => kind === 'visitors' ? runtime.send(visitors, account, id, { type: 'erase' }) : runtime.send(profiles, account, id, { type: 'erase' }),
          keysIn: (partition, account) => cluster.keysIn(partition, account),
        },
    removeMedia: cluster === null ? null : account => cluster.media.removeAccount(account),
    removeEvents: clusterEvents === null ? null : account => clusterEvents.removeAccount(account),
  })
  accountDeletions.start()
  if (cluster !== null) {
    // Accounts deleted through other nodes (or while this one was away, told as the configuration came in).
    for (const { account, name } of removedAccounts.splice(0)) accountDeletions.deletedElsewhere(account, name)
    catalogs.accountRemoved = (account, name) => accountDeletions.deletedElsewhere(account, name)
    const eraseDeleted = (partition: number): void => {
      accountDeletions.partitionOwned(partition).catch((error: unknown) => log.error({ err: error, partition }, 'erasing deleted accounts in a partition taken over failed'))
    }
    cluster.owned.add(eraseDeleted)
    for (const partition of cluster.node.status().owned) eraseDeleted(partition)
  }
  // BEACON_VISITOR_RETENTION_DAYS: anonymous visitors inactive that long are erased in the background;
  // cluster mode: each node those of the partitions it owns, through their actors (the changelog knows).
  const visitorRetention = new VisitorRetention({
    store, clock, retentionMs: config.visitorRetentionMs, sweepMs: config.visitorRetentionSweepMs,
    erase: (account, id, idleBefore) => runtime.send(visitors, account, id, { type: 'erase', idleBefore }),
    forget: (account, ids) => (clusterErasures ?? deliveries).forget(account, NO_IDS, ids),
    owns: cluster?.ownsKey ?? null,
    onErased: metrics?.countVisitorsExpired ?? null,
  })
  visitorRetention.start()
  const audit = new AuditLog(store, clock)
  // Cluster mode: images in the cluster's JetStream, served by every node (src/media/cluster-media-store.ts).
  const media: MediaStore = cluster?.media ?? new LocalMediaStore(store, clock, config.mediaPerAccountMax)
  // Cluster mode: reports, member counts and the audit log answer for every live node (each serves its own).
  const clusterReports = cluster === null ? null : new ClusterReports({ counters: reports, store, calls: cluster.calls })
  const clusterAudit = cluster === null ? null : new ClusterAudit({ audit, calls: cluster.calls })
  // Experiments' counts: this node's (embedded) or every live node's (cluster), for results and bandits.
  const experimentBuckets = clusterReports === null
    ? (account: string, fromMs: number, toMs: number) => localBuckets(reports, store, account, fromMs, toMs, 'day')
    : (account: string, fromMs: number, toMs: number) => clusterReports.buckets(account, fromMs, toMs, 'day')
  const bandits = new BanditReweighting({
    campaigns: catalogs.campaigns, buckets: experimentBuckets, clock, intervalMs: config.banditIntervalMs,
    onError: error => log.error({ err: error }, 'bandit reweighting failed'),
  })
  const segmentMembers = clusterReports === null
    ? (account: string, segments: readonly string[]): number[] => segments.map(segment => reports.membersOf(account, segment))
    : (account: string, segments: readonly string[]): Promise<number[]> => clusterReports.members(account, segments)
  // Bulk imports (docs/events.md): their bodies kept in the data folder while they run. Cluster mode: each
  // runs on the node that took it, its rows sent to their partitions' owners, read through any node.
  const imports = new ImportJobs({
    store, actors: cluster?.actors ?? runtime, visitors, profiles, clock, dir: join(config.dataDir, 'imports'), parse: importRowParser(catalogs, clock), runningMax: config.importsRunningMax,
    onError: (error, job) => log.error({ err: error, account: job.account, import: job.id }, 'import failed'),
    nodeId: cluster?.calls.nodeId ?? null,
  })
  imports.start()
  const importService: ImportService = cluster === null ? imports : new ClusterImports(imports, cluster.calls, cluster.calls.nodeId)
  const access = new Access({ adminKey, users, sessions, accountActive: account => catalogs.accounts.active(account) !== undefined })

  const server: HttpServer<RouteDefinition> = new HttpServer({
    host: config.host,
    port: config.port,
    bodySizeMaxBytes: config.bodySizeMaxBytes,
    rawBodySizeMaxBytes: config.mediaSizeMaxBytes,
    inflightMax: config.inflightMax,
    // Every /admin route gets the guard of its role and writes the audit log (src/http/protect.ts);
    // GET /openapi.json is made from the same definitions (src/http/route.ts).
    routes: withOpenApi(protectAdminRoutes([
      ...opsRoutes({
        metrics,
        metricsToken: config.metricsToken,
        lmdbOpen: () => store.isOpen,
        draining: () => server.draining,
        nats: queue === null ? null : { connected: () => queue.isConnected },
        cluster: cluster?.node ?? null,
      }),
      ...clusterRoutes(cluster?.node ?? null),
      ...publicRoutes({
        catalogs, runtime, clock, visitors, profiles,
        accountLimits: new AccountLimits({
          clock,
          inflightMax: config.accountInflightMax,
          defaultRate: { perSecond: config.accountRatePerSecond, burst: config.accountRateBurst },
          ...(cluster === null ? {} : { share: () => cluster.rateShares.keys }),
        }),
        ...(cluster === null ? {} : { rateShare: () => cluster.rateShares.keys, placement: cluster.forwarder.routing() }),
        outboxMark: () => store.lastOutboxSeq,
        afterWrite: (account, fromSeq) => {
          const timeoutMs = catalogs.webhooks.syncTimeoutMs(account)
          return timeoutMs === 0 ? null : deliveries.awaitSync(account, fromSeq, store.lastOutboxSeq, timeoutMs)
        },
        countEvent: config.reports ? (account, kind, visitorId, campaigns, campaignId, nowMs) => reports.event(account, kind, visitorId, campaigns, campaignId, nowMs) : null,
        trustedProxies: trustedProxySet(config.trustedProxies),
      }),
      ...adminRoutes({
        catalogs, runtime, visitors, profiles, deliveries, segmentMembers, accountDeletions, clusterDeliveries, backfills,
        defaultRate: { perSecond: config.accountRatePerSecond, burst: config.accountRateBurst },
        erasure: new Erasure({ store, runtime, visitors, profiles, deliveries: clusterErasures ?? deliveries, clock, links: new ProfileLinks({ store, ready: () => linksBackfill.settled(), calls: cluster?.calls ?? null }), peers: cluster?.actors ?? null, events: eventErasure }),
      }),
      ...destinationRoutes({ catalogs, clock, deliveries, clusterDeliveries }),
      ...userRoutes({ catalogs, users, sessions, clock, ...(cluster === null ? {} : { signInLimit: cluster.signInLimit }) }),
      ...auditRoutes({ catalogs, audit, clusterAudit }),
      ...eventLogRoutes({ catalogs, events }),
      ...replayRoutes({ catalogs, replays: replayService }),
      ...savedReportRoutes({ catalogs, clock, results: savedResults }),
      ...importRoutes({ catalogs, imports: importService, maxBytes: config.importMaxBytes }),
      ...mediaRoutes({ catalogs, media }),
      // Cluster mode: refused (501), a node holding only its own partitions' visitors.
      ...peopleRoutes({ catalogs, people: cluster === null ? new PeopleScan({ store, clock, segments }) : null }),
      ...tryRoutes({ catalogs, runtime, visitors, profiles, deliveries, clock }),
      ...reportRoutes({ catalogs, store, clock, foldMs: config.reportFoldMs, clusterReports, counters: reports }),
      ...sdkRoutes(),
      ...panelRoutes(),
    ], access, audit)),
    onError: (error, method, route) => log.error({ err: error, method, route }, 'request failed'),
    observe: requestObservers({ metrics, requestLogSample: config.requestLogSample, log }),
    // Cluster mode: a visitor's or profile's request goes to its partition's owner (src/cluster/forwarder.ts).
    cluster: cluster?.forwarder.routing() ?? null,
    // Cluster mode: answers name their key's owner (Beacon-Route), which clients and nginx route by.
    routeHint: cluster === null ? null : new RouteHint(cluster.node.nodeId),
  })
  cluster?.forwarder.serve((request, id) => server.runForwarded(request, id))
  const port = await server.listen()
  // Cluster mode: where clients reach this node, in the route map (GET /cluster/routes).
  // (A failed put is not fatal: every heartbeat writes it again.)
  if (cluster !== null) {
    const host = config.host.includes(':') ? `[${config.host}]` : config.host
    await cluster.node.publishUrl(config.publicUrl ?? `http://${host}:${port}`).catch((error: unknown) => log.warn({ err: error }, 'publishing this node\'s URL failed; the next heartbeat writes it'))
  }
  reports.start()
  bandits.start()

  let stopping: Promise<void> | null = null
  return {
    port,
    routes: server.routes(),
    store,
    deliveries,
    sweepSegments: () => maintenance.sweep(),
    runSchedules: () => deliveries.runSchedules(),
    pruneDeliveries: () => deliveries.prune(),
    sweepInactiveVisitors: () => visitorRetention.sweep(),
    events: localEvents,
    foldReports: () => reports.fold(),
    reweightBandits: () => bandits.run(),
    stop () {
      stopping ??= (async () => {
        // Before the pass stops: a backfill waiting for it must not take its end for the pass's.
        const backfillsStopped = backfills?.stop()
        maintenance.stop()
        stopIdempotencySweep()
        stopEventTrim?.()
        stopSavedLoad?.()
        savedFeed?.stop()
        stopSavedCompaction?.()
        await bandits.stop()
        await server.drain()
        // The steps under way end; the rest resumes at the next start.
        await imports.stop()
        // Its erases write through the partitions' owners: done before they are handed over.
        await visitorRetention.stop()
        await replays?.stop()
        await backfillsStopped
        // Cluster mode: in-flight writes done, every partition handed over and its lease released.
        if (cluster !== null) await cluster.stop()
        await accountDeletions.stop()
        await linksBackfill.stop()
        await runtime.drain()
        await clusterErasures?.stop()
        await deliveries.stop()
        await destinationHttp.close()
        await reports.stop().catch((error: unknown) => log.error({ err: error }, 'report fold failed'))
        runtime.close()
        await store.close()
      })()
      return stopping
    },
  }
}

const NO_IDS: ReadonlySet<string> = new Set()

const unions = new WeakMap<ReadonlySet<string>, WeakMap<ReadonlySet<string>, ReadonlySet<string>>>()

/**
 * Both sets of names. The hot path asks per write: a set is made only when both have names, once per
 * pair (the catalogs replace their sets when their configuration changes, so the pair names the union).
 */
function unionOf (a: ReadonlySet<string>, b: ReadonlySet<string>): ReadonlySet<string> {
  if (b.size === 0) return a
  if (a.size === 0) return b
  let byB = unions.get(a)
  if (byB === undefined) unions.set(a, byB = new WeakMap())
  let union = byB.get(b)
  if (union === undefined) byB.set(b, union = new Set([...a, ...b]))
  return union
}

/** The JetStream transport, or an error that names the NATS server (never its credentials). */
async function connectNats (url: string, nodeId: string, onConnection: ((connected: boolean) => void) | undefined, settings: Pick<JetStreamQueueOptions, 'access' | 'ackPendingMax' | 'ackWaitMs' | 'outcomes' | 'erasures'>): Promise<JetStreamQueue> {
  try {
    // The transport's timing runs against the NATS server's (ack_wait, heartbeats, publish timeouts):
    // the system clock, even when Beacon runs on a manual one (tests).
    return await JetStreamQueue.connect({ url, name: 'beacon', nodeId, onConnection, ...settings, clock: systemClock })
  } catch (error) {
    throw new Error(`cannot connect to NATS at ${redactUrl(url)} (BEACON_NATS_URL): ${error instanceof Error ? error.message : String(error)}`)
  }
}
