// One cluster node's entity side, in process, for the entity log tests: a real LMDB store in a temp
// folder, an actor runtime with the visitor and profile kinds writing through an EntityLog over a real
// changelog on the test's NATS cluster. No HTTP, no leases: the test decides who recovers what.

import { connect, type NatsConnection } from '@nats-io/transport-node'
import { Store, type OutboxAppended } from '../../src/store/store.js'
import { Listeners } from '../../src/listeners.js'
import { Changelogs } from '../../src/cluster/changelogs.js'
import type { ClusterError } from '../../src/cluster/errors.js'
import { ActorRuntime } from '../../actors/runtime.js'
import { visitorKind, type EventBody, type VisitorKind } from '../../actors/visitor.js'
import { profileKind, type ProfileKind } from '../../actors/profile.js'
import { EntityLog } from '../../actors/entity-log.js'
import { EMPTY_SEGMENTS } from '../../src/segments/segment-set.js'
import { TableOwnership } from './table-ownership.js'
import { manualClock } from './clock.js'
import { removeDir, tempDir } from './beacon.js'
import { Catalogs } from '../../src/catalog/catalogs.js'
import type { WebhookChanged } from '../../src/webhooks/lookup.js'
import { DeliveryHub } from '../../src/delivery/hub.js'
import { RelayGate } from '../../src/delivery/relay-gate.js'
import { systemClock } from '../../src/clock.js'
import { ACCOUNT as WEBHOOK_ACCOUNT, config as webhookConfig } from '../webhooks/helpers.js'

export const PARTITIONS = 8

export interface EntityNode {
  id: string
  store: Store
  runtime: ActorRuntime
  visitors: VisitorKind
  profiles: ProfileKind
  log: EntityLog
  changelog: Changelogs
  nc: NatsConnection
  /** Partitions the log reported refused, with the error. */
  refused: [number, ClusterError][]
  /** Background snapshots that failed (a fenced one is expected once another node claimed). */
  snapshotErrors: [number, unknown][]
  /** What relayedThrough answers without a delivery hub (the tests move it). */
  relayed: { through: number }
  /** With `webhookUrl`: the delivery hub (embedded queue) relaying this node's outbox; the log's watermark is its relay's. */
  hub: DeliveryHub | null
  /** Stops the hub (once): rows not relayed yet stay in the outbox, as after a crash. */
  stopHub (): Promise<void>
  event (account: string, visitorId: string, fields: Partial<EventBody> & { event: string }): Promise<unknown>
  close (): Promise<void>
}

export interface EntityNodeOptions {
  servers: string[]
  cluster?: string
  replicas?: number
  entriesMax?: number
  chunkMaxBytes?: number
  /**
   * A webhook `orders` of account WEBHOOK_ACCOUNT (test/webhooks/helpers.ts) posting each purchase's
   * `{"order": <orderId>}` here, through a real delivery hub on this node's outbox.
   */
  webhookUrl?: string
  /** The node's data folder (a node restarted on it); kept on close. Default: a new temp folder, removed on close. */
  dir?: string
  /** The changelog's appendTimeoutMs (default its own). */
  appendTimeoutMs?: number
  /** Changelog streams the partitions are spread over (default 1). */
  streams?: number
}

export async function startEntityNode (id: string, options: EntityNodeOptions): Promise<EntityNode> {
  const dir = options.dir ?? tempDir('beacon-entity-log-')
  const outboxAppended = new Listeners<OutboxAppended>()
  const store = new Store({ path: dir, durability: 'committed', outboxAppended })
  const nc = await connect({ servers: options.servers, reconnectTimeWait: 100, maxReconnectAttempts: -1, ignoreClusterUpdates: options.servers.length === 1 })
  const cluster = options.cluster ?? 'test'
  const changelog = await Changelogs.open({ nc, owner: id, replicas: options.replicas ?? 3, cluster, count: options.streams ?? 1, appendTimeoutMs: options.appendTimeoutMs })
  const clock = manualClock()
  const runtime = new ActorRuntime({ clock, actorsMax: 100_000, actorIdleMs: 3_600_000, mailboxMax: 10_000 })
  const refusedList = new Listeners<(partition: number, error: ClusterError) => void>()
  const relayed = { through: 0 }
  let relayedThrough = (): number => relayed.through
  const snapshotErrors: [number, unknown][] = []
  // As in cluster mode: the hub's relay takes a write's rows once its append is acknowledged.
  const gate = new RelayGate()
  const log = new EntityLog({
    store, changelog, ownership: new TableOwnership(id, PARTITIONS, new Map()), outboxAppended, relayedThrough: () => relayedThrough(), gate,
    refused: refusedList, runtime, entriesMax: options.entriesMax, chunkMaxBytes: options.chunkMaxBytes,
    onSnapshotError: (partition, error) => { snapshotErrors.push([partition, error]) },
  })
  // As cluster mode starts (src/cluster-mode.ts): the previous run's outbox rows go before the hub relays.
  await log.forgetLeftoverRows()
  const hub = options.webhookUrl === undefined ? null : await startHub(store, outboxAppended, options.webhookUrl, gate)
  if (hub !== null) relayedThrough = () => hub.relayedThrough
  let hubStopped = false
  const stopHub = async (): Promise<void> => {
    if (hub === null || hubStopped) return
    hubStopped = true
    await hub.stop()
  }
  const refused: [number, ClusterError][] = []
  refusedList.add((partition, error) => refused.push([partition, error]))
  const common = { store, clock, wantsEvent: () => true, wantsChange: () => false, listsMembers: () => false, attributesWanted: () => new Set<string>(), writes: log }
  const profiles = profileKind({ ...common, segments: () => EMPTY_SEGMENTS })
  const visitors = visitorKind({ ...common, runtime, profiles, campaigns: () => null, segments: () => EMPTY_SEGMENTS })
  return {
    id, store, runtime, visitors, profiles, log, changelog, nc, refused, relayed, snapshotErrors, hub, stopHub,
    event (account, visitorId, fields) {
      clock.advance(1)
      return runtime.send(visitors, account, visitorId, { type: 'event', event: { account, visitorId, platform: 'web', ...fields }, nowMs: clock.nowMs() })
    },
    async close () {
      log.close()
      await runtime.drain()
      runtime.close()
      await stopHub()
      await nc.close()
      await store.close()
      if (options.dir === undefined) removeDir(dir)
    },
  }
}

/** `count` distinct ids whose key (account, id) falls in the partition. */
export function idsIn (log: EntityLog, account: string, partition: number, count: number, prefix = 'v'): string[] {
  const ids: string[] = []
  for (let n = 0; ids.length < count; n++) {
    const id = `${prefix}-${n}`
    if (log.partitionOfKey(account, id) === partition) ids.push(id)
  }
  return ids
}

async function startHub (store: Store, outboxAppended: Listeners<OutboxAppended>, url: string, relayGate: RelayGate): Promise<DeliveryHub> {
  await store.save(store.accounts, WEBHOOK_ACCOUNT, { account: WEBHOOK_ACCOUNT, name: 'entity log', suspended: false, createdAt: new Date().toISOString() })
  const webhookChanged = new Listeners<WebhookChanged>()
  const catalogs = new Catalogs({ store, clock: systemClock, segmentsChanged: new Listeners(), webhookChanged, allowPrivateWebhooks: true })
  await catalogs.webhooks.put(WEBHOOK_ACCOUNT, 'orders', webhookConfig(url, { request: { payload: '{"order": {{event.orderId}}}' } }))
  const hub = new DeliveryHub({ store, registry: catalogs.webhooks, webhookChanged, outboxAppended, clock: systemClock, allowPrivate: true, relayGate })
  await hub.start()
  return hub
}
