// Cluster mode's wiring (BEACON_CLUSTER set), called by src/app.ts: its own NATS connection, the
// cluster node (leases, members, ownership: src/cluster/node.ts), the entity log the visitor and
// profile kinds write through (actors/entity-log.ts), the replicated configuration the catalogs write
// through (src/catalog/replicated-config.ts: the panel users' records too), the panel sessions' shared
// bucket (src/cluster/session-kv.ts) and the forwarder that routes requests to their
// partition's owner (src/cluster/forwarder.ts), and the calls to a named node (src/cluster/node-calls.ts:
// the deliveries log, reports and audit log of every node), and the media every node serves from the
// cluster's Object Store bucket (src/media/cluster-media-store.ts), joined as docs/cluster.md says. Nothing here runs in
// embedded mode.

import type { NatsConnection } from '@nats-io/transport-node'
import { redactUrl, type Config, type NatsAuth } from './config.js'
import { log } from './log.js'
import { Listeners } from './listeners.js'
import { KEY_PART_MAX, type OutboxAppended, type Store } from './store/store.js'
import type { IdempotencySwept } from './store/idempotency.js'
import { partitionIndex } from '../actors/entity-log-format.js'
import { changelogExists, changelogStream, Changelogs, spreadLeaders } from './cluster/changelogs.js'
import { ClusterNode } from './cluster/node.js'
import { EventStream } from './cluster/event-stream.js'
import { unsupportedServer } from './cluster/server-version.js'
import { EntityLog, type PartitionRefused } from '../actors/entity-log.js'
import type { ActorRuntime } from '../actors/runtime.js'
import { connectNats } from './delivery/jetstream/connect.js'
import type { Metrics } from './ops/metrics.js'
import { Forwarder } from './cluster/forwarder.js'
import type { Catalogs } from './catalog/catalogs.js'
import { startReplicatedConfig, type ReplicatedConfig } from './catalog/replicated-config.js'
import { ScheduleClaims } from './cluster/schedule-claims.js'
import type { ScheduleCluster } from './delivery/schedules.js'
import { ActorRouter } from '../actors/actor-router.js'
import { NodeCalls } from './cluster/node-calls.js'
import { ObjectBucket } from './cluster/object-bucket.js'
import { LeaseTable } from './cluster/leases.js'
import { ClusterMediaStore, MEDIA_LOCK_MS } from './media/cluster-media-store.js'
import type { Clock } from './clock.js'
import type { Replicated } from './store/config-writer.js'
import { SESSION_TTL_MARGIN_MS, SessionKv } from './cluster/session-kv.js'
import type { SessionBucket } from './users/sessions.js'
import { RelayGate } from './delivery/relay-gate.js'
import { RateShares } from './cluster/rate-shares.js'
import { SignInKv } from './cluster/sign-in-kv.js'
import { settleChangelogStreams, settleSecretsKey } from './cluster/cluster-meta.js'
import { EntrySigner } from './cluster/entry-signer.js'
import { SharedSignInLimit } from './users/shared-sign-in-limit.js'
import { SIGN_IN_LIMITS, type SignInLimiter } from './users/sign-in-limit.js'

export interface ClusterMode {
  node: ClusterNode
  /** The kinds' `writes`. */
  entityLog: EntityLog
  /**
   * The delivery hub's cluster side: delivery ids with this node's id, schedule runs claimed once per
   * cluster. (Outcomes go back to a record's holder through the delivery transport's outcome stream:
   * src/delivery/jetstream/outcome-stream.ts; the erasure of a person's records reaches every node
   * through its erasure stream: src/delivery/cluster-erasures.ts and jetstream/erasure-stream.ts, built
   * in src/app.ts from the delivery transport.)
   */
  deliveries: { idOrigin: string, schedules: ScheduleCluster, rateShare: () => number }
  /** Holds each write's outbox rows from the delivery hub's relay until its append is acknowledged. */
  relayGate: RelayGate
  /** This node's shares of the rate limits (rate-shares.ts): requests by their keys' owner, deliveries by node. */
  rateShares: RateShares
  /** Failed panel sign-ins counted by every node together. */
  signInLimit: SignInLimiter
  /** Whether this node owns (account, id)'s partition now (jobs touch only those keys). */
  ownsKey (account: string, id: string): boolean
  /** Told each time a partition becomes owned here (recovered). */
  owned: Listeners<(partition: number) => void>
  /** The ids of an account's visitors and profiles this node's store lists in a partition. */
  keysIn (partition: number, account: string): Iterable<{ kind: 'visitors' | 'profiles', id: string }>
  /** The HTTP server's routing (`cluster: forwarder.routing()`, then `forwarder.serve(…)` once it exists). */
  forwarder: Forwarder
  /** Messages between actors of partitions other nodes own (the kinds' and erasure's `peers`; `serve(kinds)` once they exist). */
  actors: ActorRouter
  /**
   * Calls to a named node: the deliveries log, reports and member counts, and audit log of every node
   * (src/delivery/cluster-history.ts, src/reports/cluster-reports.ts, src/audit/cluster-audit.ts serve
   * and call through it; src/app.ts builds them).
   */
  calls: NodeCalls
  /** The retained event log: the cluster's JetStream stream of accepted events (null: BEACON_EVENT_RETENTION_DAYS=0). */
  events: EventStream | null
  /** The media routes' store (images in the cluster's bucket) and the account deletions' `removeMedia`. */
  media: ClusterMediaStore
  /**
   * Applies the cluster's configuration (the catalogs and the panel users write through its bucket
   * from then on) and the panel sessions' bucket, then catches up with the media bucket, joins and
   * starts taking partitions. After the delivery hub started: recovery resends outbox rows, and the hub
   * hears of the webhooks the configuration brings.
   */
  start (catalogs: Catalogs, panel: PanelSharing): Promise<void>
  /** Hands every partition over (in-flight writes finished, leases released), leaves, closes NATS. */
  stop (): Promise<void>
}

/** The panel's users and sessions, shared by every node of the cluster (src/users). */
export interface PanelSharing {
  users: Replicated
  sessions: {
    /** Sessions live in `bucket` from then on; resolves once its sessions are in memory here. */
    share (bucket: SessionBucket): Promise<void>
    close (): void
  }
}

export interface ClusterModeOptions {
  config: Config
  store: Store
  clock: Clock
  runtime: ActorRuntime
  outboxAppended: Listeners<OutboxAppended>
  /** The Idempotency-Key sweep's removals: the entity log forgets them in its partition index. */
  idempotencySwept: Listeners<IdempotencySwept>
  metrics: Metrics | null
  /** The delivery hub's relay watermark and settling (a closure: the hub is built after the kinds). */
  relayedThrough: () => number
  relaySettled: () => Promise<void>
  /** How long an account's requests may wait at the owner for their sync webhooks (forwarding waits that much longer). */
  syncTimeoutMs: (account: string) => number
}

/** Opens the node (refusing to start on a partition count or node id conflict) and its entity log. */
export async function openClusterMode (options: ClusterModeOptions): Promise<ClusterMode> {
  const { config, store, clock, runtime, outboxAppended, metrics } = options
  const { cluster, natsUrl } = config
  if (cluster === null || natsUrl === null) throw new Error('cluster mode needs BEACON_CLUSTER and BEACON_NATS_URL')
  const nodeId = config.nodeId ?? store.nodeId
  const nc = await connect(natsUrl, config.natsAuth)
  const unsupported = unsupportedServer(nc)
  if (unsupported !== null && config.natsAnyVersion) {
    log.warn({ natsServer: nc.info?.version }, `${unsupported}; starting anyway (BEACON_NATS_ANY_VERSION, for benchmarks only: acknowledged writes can be lost)`)
  } else if (unsupported !== null) {
    await nc.close()
    throw new Error(unsupported)
  }
  const owned = new Listeners<(partition: number) => void>()
  try {
    // Before anything is written: a node with another key would seal, open and sign with the wrong one.
    await settleSecretsKey(nc, cluster, store.secrets.rawKeys, config.replicas)
    const signer = new EntrySigner(store.secrets.rawKeys)
    const node = await ClusterNode.open({
      nc, cluster, nodeId, partitions: config.partitions, replicas: config.replicas, leaseMs: config.leaseMs,
      onTakeover: takeover => {
        log.info({ ...takeover }, 'partition taken over')
        metrics?.recordTakeover(takeover.takeoverMs)
      },
      onOwned: partition => { for (const listener of owned.list) listener(partition) },
    })
    // The changelog streams the cluster spreads its partitions over: fixed when it was created (changelogs.ts).
    const streams = await settleChangelogStreams(nc, cluster, config.changelogStreams, () => changelogExists(nc, cluster), config.replicas)
    if (streams !== config.changelogStreams) log.info({ streams, setting: config.changelogStreams }, 'changelog streams: the cluster\'s number, set when it was created, not BEACON_CHANGELOG_STREAMS')
    const changelog = await Changelogs.open({ nc, cluster, count: streams, replicas: config.replicas, owner: nodeId, onAppended: metrics?.observeChangelogAppendMs })
    if (streams > 1 && config.replicas > 1) {
      const names = Array.from({ length: streams }, (_, i) => changelogStream(cluster, i).stream)
      void spreadLeaders(nc, names, config.replicas).then(
        leaders => log.info({ streams: names, leaders }, 'changelog streams\' leaders'),
        (error: unknown) => log.warn({ err: error }, 'changelog streams\' leaders could not be spread'))
    }
    const refused = new Listeners<PartitionRefused>()
    refused.add((partition, error) => node.refused(partition, error))
    // A write's outbox rows wait for its append's acknowledgement before the relay takes them.
    const gate = new RelayGate()
    const entityLog = new EntityLog({
      store, changelog, ownership: node, outboxAppended, refused, runtime, gate, idempotencySwept: options.idempotencySwept,
      relayedThrough: options.relayedThrough, relaySettled: options.relaySettled,
      onSnapshotError: (partition, error) => log.warn({ err: error, partition }, 'partition snapshot failed'),
    })
    const leftover = await entityLog.forgetLeftoverRows()
    if (leftover > 0) log.info({ rows: leftover }, 'outbox rows left by the previous run removed: the recoveries of their partitions resend those of acknowledged writes')
    metrics?.watchCluster(node)
    const forwarder = new Forwarder({
      nc, cluster, ownership: node, handlerExtraMs: options.syncTimeoutMs, batch: config.forwardBatch,
      observe: metrics === null ? null : outcome => { if (outcome === 'answered') metrics.countForwarded() },
    })
    metrics?.watchForwarder(forwarder)
    const claims = await ScheduleClaims.open({ nc, cluster, replicas: config.replicas })
    const ownsKey = (account: string, id: string): boolean => node.owns(node.partitionOf(account, id))
    const actors = new ActorRouter({ nc, cluster, ownership: node, runtime })
    const calls = new NodeCalls({ nc, cluster, nodeId, live: () => node.liveNodes() })
    const media = new ClusterMediaStore({
      bucket: await ObjectBucket.open({ nc, bucket: `BEACON_MEDIA_${cluster}`, replicas: config.replicas }),
      locks: await LeaseTable.open({ nc, bucket: `BEACON_MEDIA_LOCKS_${cluster}`, leaseMs: MEDIA_LOCK_MS, replicas: config.replicas, node: store.nodeId.replace(/[^A-Za-z0-9_-]/g, '_') }),
      store, clock, perAccountMax: config.mediaPerAccountMax,
    })
    const events = config.eventRetentionDays === 0
      ? null
      : await EventStream.open({ nc, cluster, replicas: config.replicas, retentionMs: config.eventRetentionDays * 86_400_000, sizeMaxBytes: config.eventLogMaxBytes })
    const rateShares = new RateShares(node, config.partitions)
    const signInLimit = new SharedSignInLimit(await SignInKv.open({ nc, bucket: `BEACON_SIGNIN_${cluster}`, replicas: config.replicas, ttlMs: SIGN_IN_LIMITS.windowMs }))
    owned.add(() => { rateShares.update() })
    let replicatedConfig: ReplicatedConfig | null = null
    let sessions: PanelSharing['sessions'] | null = null
    return {
      node,
      entityLog,
      ownsKey,
      owned,
      * keysIn (partition, account) {
        const index = partitionIndex(store)
        for (const tag of ['v', 'p'] as const) {
          for (const key of index.getKeys({ start: [partition, tag, account], end: [partition, tag, account, KEY_PART_MAX] })) {
            yield { kind: tag === 'v' ? 'visitors' : 'profiles', id: (key as [number, string, string, string])[3] }
          }
        }
      },
      deliveries: {
        // The data folder's id: unique per folder, so a node given a fresh folder under the same
        // BEACON_NODE_ID (its outbox counting from 1 again) does not reuse ids either.
        idOrigin: store.nodeId,
        schedules: {
          partitions: config.partitions,
          partitionOf: (account, id) => node.partitionOf(account, id),
          owns: partition => node.owns(partition),
          claim: (account, webhookId, runMs, part) => claims.claim(account, webhookId, runMs, part, nodeId),
          staleAfterMs: claims.ttlMs / 2,
        },
        rateShare: () => rateShares.deliveries,
      },
      relayGate: gate,
      rateShares,
      signInLimit,
      forwarder,
      actors,
      calls,
      events,
      media,
      async start (catalogs, panel) {
        replicatedConfig = await startReplicatedConfig({ nc, cluster, replicas: config.replicas, store, catalogs, users: panel.users, signer, resign: config.clusterResign })
        await replicatedConfig.ready
        sessions = panel.sessions
        await sessions.share(await SessionKv.open({ nc, bucket: `BEACON_SESSIONS_${cluster}`, replicas: config.replicas, ttlMs: config.sessionTtlMs + SESSION_TTL_MARGIN_MS, signer }))
        await media.start()
        await node.start(entityLog)
        rateShares.start()
        forwarder.sync()
        actors.sync()
        log.info({ cluster, node: nodeId, partitions: config.partitions, recovering: node.status().recovering.length }, 'cluster node joined')
      },
      async stop () {
        // Handing over: requests forwarded here meanwhile are answered, or "moved" once a partition went.
        rateShares.stop()
        await node.close()
        await forwarder.close()
        await actors.close()
        await calls.close()
        replicatedConfig?.close()
        media.close()
        sessions?.close()
        entityLog.close()
        events?.close()
        await nc.close().catch(() => {})
      },
    }
  } catch (error) {
    await nc.close().catch(() => {})
    throw error
  }
}

async function connect (url: string, access: NatsAuth): Promise<NatsConnection> {
  try {
    return await connectNats(url, 'beacon-cluster', access)
  } catch (error) {
    throw new Error(`cannot connect to NATS at ${redactUrl(url)} (BEACON_NATS_URL, cluster mode): ${error instanceof Error ? error.message : String(error)}`)
  }
}
