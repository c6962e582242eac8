// Beacon assembled: store → registry → actors → HTTP, webhooks through the embedded or the JetStream
// queue. `startBeacon` is what main.ts and the benchmarks run; `stop` is the graceful shutdown: stop
// accepting and answer the requests in flight, wait for their writes, finish the relay pass under way
// (rows not yet relayed stay in the outbox for the next start), stop the delivery workers (what they
// had not sent stays pending, or goes back to the stream), close NATS, then flush and close LMDB.

import { redactUrl, type Config } from './config.js'
import { systemClock, type Clock } from './clock.js'
import { Store } from './store/store.js'
import { LinksBackfill } from './store/links-backfill.js'
import { Registry } from './store/registry.js'
import { HttpServer, type Route } from './http/server.js'
import { publicRoutes } from './http/public-routes.js'
import { adminRoutes } from './http/admin-routes.js'
import { sdkRoutes } from './http/sdk-routes.js'
import { panelRoutes } from './http/panel-routes.js'
import { ActorRuntime } from '../actors/runtime.js'
import { visitorKind } from '../actors/visitor.js'
import { profileKind } from '../actors/profile.js'
import { log } from './log.js'
import { SegmentMaintenance } from './segments/maintenance.js'
import { DeliveryHub } from '../actors/delivery.js'
import { Erasure } from '../actors/erasure.js'
import { AccountDeletions } from '../actors/account-deletion.js'
import type { SegmentSet } from './segments/segment-set.js'
import { JetStreamQueue } from './webhooks/jetstream-queue.js'
import { Metrics } from './ops/metrics.js'
import { opsRoutes } from './ops/ops-routes.js'
import { requestObservers } from './ops/request-log.js'
import { Users } from './users/users.js'
import { Sessions } from './users/sessions.js'
import { AuditLog } from './audit/audit-log.js'
import { Access } from './http/access.js'
import { protectAdminRoutes } from './http/protect.js'
import { userRoutes } from './http/user-routes.js'
import { auditRoutes } from './http/audit-routes.js'
import { MediaStore } from './media/media-store.js'
import { mediaRoutes } from './http/media-routes.js'
import { tryRoutes } from './http/try-routes.js'
import { reportRoutes } from './http/report-routes.js'
import { ReportCounters } from './reports/counters.js'
import { AccountLimits } from './http/account-limits.js'

export interface Beacon {
  port: number
  /** Every route served, as assembled (admin routes with their guard and role): tests walk it. */
  routes: readonly Route[]
  /** The LMDB store (for tools and in-process tests that inspect the outbox). */
  store: Store
  deliveries: DeliveryHub
  /** Evaluate now the entities whose segment windows expired (the periodic sweep, on demand: tests). */
  sweepSegments (): Promise<number>
  /** Run the schedule webhooks that are due (the periodic tick, on demand: tests). */
  runSchedules (): Promise<number>
  /** Fold the report counters into the store now (the periodic fold, on demand: tests). */
  foldReports (): Promise<void>
  /** Delete the delivered records past their retention (the periodic pass, on demand: tests). */
  pruneDeliveries (): Promise<number>
  stop (): Promise<void>
}

export interface StartOptions {
  config: Config
  adminKey: string
  clock?: Clock
}

export async function startBeacon ({ config, adminKey, clock = systemClock }: StartOptions): Promise<Beacon> {
  const store = new Store({ path: config.dataDir, durability: config.durability, mapSizeBytes: config.mapSizeBytes, secretsKey: config.secretsKey })
  const registry = new Registry(store, clock)
  const runtime = new ActorRuntime({ clock, actorsMax: config.actorsMax, actorIdleMs: config.actorIdleMs, mailboxMax: config.mailboxMax })
  const segments = (account: string): SegmentSet => registry.segmentSet(account)
  const wantsEvent = (account: string, type: string): boolean => registry.wantsEvent(account, type)
  const wantsChange = (account: string, change: 'enter' | 'exit', segment: string): boolean => registry.wantsChange(account, change, segment)
  const listsMembers = (account: string, segment: string): boolean => registry.listsMembers(account, segment)
  const attributesWanted = (account: string): ReadonlySet<string> => registry.webhookAttributes(account)
  const reports = new ReportCounters({
    store, clock, foldMs: config.reportFoldMs, hasCampaign: (account, id) => registry.hasCampaign(account, id),
    onError: error => log.error({ err: error }, 'report fold failed'),
  })
  // BEACON_REPORTS=false: nothing is counted (reports and member counts stay as last folded).
  const membership = config.reports ? reports.membership : null
  const profiles = profileKind({ store, segments, clock, wantsEvent, wantsChange, listsMembers, attributesWanted, membership })
  const visitors = visitorKind({ store, runtime, profiles, campaigns: account => registry.campaignSet(account), segments, clock, wantsEvent, wantsChange, listsMembers, attributesWanted, membership })
  const maintenance = new SegmentMaintenance({ store, registry, runtime, visitors, profiles, clock, sweepMs: config.segmentSweepMs })
  registry.onSegmentsChanged = (account, version) => maintenance.startPass(account, version)
  maintenance.start()
  registry.allowPrivateWebhooks = config.webhookAllowPrivate
  const metrics = config.metrics ? new Metrics({ runtime, store, dataDir: config.dataDir }) : null
  if (metrics !== null) store.onDurableMs = metrics.observeCommitMs
  const queue = config.natsUrl === null ? null : await connectNats(config.natsUrl, store.nodeId, metrics?.setNatsConnected, config.natsMaxAckPending)
  const deliveries = new DeliveryHub({
    store, registry, clock, allowPrivate: config.webhookAllowPrivate, onAttempt: (outcome, latencyMs, account, count) => {
      metrics?.recordDelivery(outcome, latencyMs)
      if (config.reports) reports.delivery(account, outcome, latencyMs, count)
    }, membersReady: account => maintenance.idle(account),
    retentionMs: config.deliveryRetentionMs,
    ...(queue === null ? {} : { queue }),
  })
  await deliveries.start()
  const linksBackfill = new LinksBackfill(store)
  linksBackfill.start()

  const users = new Users(store, clock)
  const sessions = new Sessions(store, clock, config.sessionTtlMs)
  users.onSessionsEnd = id => sessions.revokeUser(id)
  const accountDeletions = new AccountDeletions({
    store, registry, clock, entitiesIdle: account => maintenance.idle(account), forgetUsers: account => users.removeAccount(account),
  })
  accountDeletions.start()
  const audit = new AuditLog(store, clock)
  const access = new Access({ adminKey, users, sessions, accountActive: account => registry.activeAccount(account) !== undefined })

  const server: HttpServer = new HttpServer({
    host: config.host,
    port: config.port,
    maxBodyBytes: config.maxBodyBytes,
    rawBodyBytes: config.mediaMaxBytes,
    inflightMax: config.inflightMax,
    // Every /admin route gets the guard of its role and writes the audit log (src/http/protect.ts).
    routes: protectAdminRoutes([
      ...opsRoutes({
        metrics,
        lmdbOpen: () => store.isOpen,
        draining: () => server.draining,
        nats: queue === null ? null : { connected: () => queue.isConnected },
      }),
      ...publicRoutes({
        registry, runtime, clock, visitors, profiles,
        accountLimits: new AccountLimits({
          clock,
          inflightMax: config.accountInflightMax,
          defaultRate: { perSecond: config.accountRatePerSecond, burst: config.accountRateBurst },
        }),
        outboxMark: () => store.lastOutboxSeq,
        afterWrite: (account, fromSeq) => {
          const timeoutMs = registry.syncTimeoutMs(account)
          return timeoutMs === 0 ? null : deliveries.awaitSync(account, fromSeq, store.lastOutboxSeq, timeoutMs)
        },
        countEvent: config.reports ? (account, kind, visitorId, campaigns, campaignId, nowMs) => reports.event(account, kind, visitorId, campaigns, campaignId, nowMs) : null,
      }),
      ...adminRoutes({
        registry, runtime, visitors, profiles, deliveries, segmentMembers: reports.membersOf, accountDeletions,
        erasure: new Erasure({ store, runtime, visitors, profiles, deliveries, clock, linksReady: () => linksBackfill.settled() }),
      }),
      ...userRoutes({ registry, users, sessions, clock }),
      ...auditRoutes({ registry, audit }),
      ...mediaRoutes({ registry, media: new MediaStore(store, clock) }),
      ...tryRoutes({ registry, runtime, visitors, profiles, deliveries, clock }),
      ...reportRoutes({ registry, store, clock, foldMs: config.reportFoldMs }),
      ...sdkRoutes(),
      ...panelRoutes(),
    ], access, audit),
    onError: (error, method, route) => log.error({ err: error, method, route }, 'request failed'),
    observe: requestObservers({ metrics, requestLogSample: config.requestLogSample, log }),
  })
  const port = await server.listen()
  reports.start()

  let stopping: Promise<void> | null = null
  return {
    port,
    routes: server.routes(),
    store,
    deliveries,
    sweepSegments: () => maintenance.sweep(),
    runSchedules: () => deliveries.runSchedules(),
    pruneDeliveries: () => deliveries.prune(),
    foldReports: () => reports.fold(),
    stop () {
      stopping ??= (async () => {
        maintenance.stop()
        await server.drain()
        await accountDeletions.stop()
        await linksBackfill.stop()
        await runtime.drain()
        await deliveries.stop()
        await reports.stop().catch((error: unknown) => log.error({ err: error }, 'report fold failed'))
        runtime.close()
        await store.close()
      })()
      return stopping
    },
  }
}

/** The JetStream transport, or an error that names the NATS server (never its credentials). */
async function connectNats (url: string, nodeId: string, onConnection: ((connected: boolean) => void) | undefined, maxAckPending: number): Promise<JetStreamQueue> {
  try {
    return await JetStreamQueue.connect({ url, name: 'beacon', nodeId, onConnection, maxAckPending })
  } catch (error) {
    throw new Error(`cannot connect to NATS at ${redactUrl(url)} (BEACON_NATS_URL): ${error instanceof Error ? error.message : String(error)}`)
  }
}
