// Schedule webhooks: when a schedule's time (plus its delayMs) has come, a full sync of its segments'
// members, one delivery per member (the worker batches them by batchSize), or, without segments, one
// call carrying the account and the time. The last run is kept in the config db, so a restart goes on
// from it.
// Cluster mode (`cluster`): every node runs each schedule's runs, but sends a run's members only of the
// partitions it owns, each partition's part once its claim for (webhook, run, partition) succeeded,
// and the call without segments once its claim for (webhook, run) did: one node in the cluster each.
// A partition this node takes after it walked a run (a takeover, a handover) gets its part of that run
// at the next check, unless its previous owner claimed it: no partition misses a run for moving.
// Saved reports with a delivery (scheduled-reports.ts) run here too: at each due time the report's
// result is one delivery to its webhook, written in the transaction of the run's row (its time), so a
// restart neither loses nor repeats a run. Cluster mode: made by the one node whose claim for
// (report, run) succeeded, its run's row replicated after the delivery is written (a crash between the
// two makes that run once more after the restart: docs/reports.md).

import type { Clock } from '../clock.js'
import type { WebhookLookup } from '../webhooks/lookup.js'
import type { Store } from '../store/store.js'
import type { CompiledWebhook } from '../webhooks/compile.js'
import { nextRunMs } from '../webhooks/schedule.js'
import type { DeliveryContext } from '../webhooks/types.js'
import type { HubWrites } from './hub-writes.js'
import { SCHEDULE_INTERVAL_MS, SCHEDULE_PAGE_MAX } from './limits.js'
import type { DeliveryQueue } from './queue.js'
import { scheduledRecord, slot } from './record.js'
import { NO_REPORTS, type LastDelivery, type ScheduledReport, type ScheduledReports } from './scheduled-reports.js'

export interface SchedulesOptions {
  store: Store
  registry: WebhookLookup
  clock: Clock
  queue: DeliveryQueue
  writes: HubWrites
  /** Resolves when the account's members index is complete (no re-indexing pass under way). */
  membersReady: (account: string) => Promise<void>
  onFailure: (error: unknown) => void
  /** Cluster mode: this node's id in every delivery id it makes; null in embedded mode. */
  idOrigin?: string | null
  /** Cluster mode: ownership and run claims (src/cluster/schedule-claims.ts); null in embedded mode. */
  cluster?: ScheduleCluster | null
  /** Saved reports with a delivery; NO_REPORTS in cluster mode and without a retained event log. */
  reports?: ScheduledReports
}

/** What a node of a cluster tells the schedules. */
export interface ScheduleCluster {
  /** The number of partitions, the partition of (account, id), and whether this node owns one now. */
  partitions: number
  partitionOf: (account: string, id: string) => number
  owns: (partition: number) => boolean
  /** True for the one node of the cluster that claims this part of this run first. */
  claim: (account: string, webhookId: string, runMs: number, part: number | 'all') => Promise<boolean>
  /** Runs due longer ago than this are skipped, not made (their claims may have lapsed). */
  staleAfterMs: number
}

export class Schedules {
  private readonly store: Store
  private readonly registry: WebhookLookup
  private readonly clock: Clock
  private readonly queue: DeliveryQueue
  private readonly writes: HubWrites
  private readonly membersReady: (account: string) => Promise<void>
  private readonly onFailure: (error: unknown) => void
  private readonly idOrigin: string | null
  private readonly cluster: ScheduleCluster | null
  private readonly reports: ScheduledReports
  /** Per saved report with a delivery, its schedule (cron source) and the time of its next run. */
  private reportRuns = new Map<string, { source: string, dueMs: number }>()
  /** Per schedule webhook, the time of its next run (before its delay). */
  private readonly nextRuns = new Map<string, number>()
  /** Cluster mode: per schedule webhook with segments, its latest run and the partitions walked for it. */
  private readonly walked = new Map<string, { runMs: number, partitions: Set<number> }>()
  private scheduling: Promise<number> | null = null
  private timer: NodeJS.Timeout | null = null
  private stopped = false

  constructor ({ store, registry, clock, queue, writes, membersReady, onFailure, idOrigin = null, cluster = null, reports = NO_REPORTS }: SchedulesOptions) {
    this.reports = reports
    this.idOrigin = idOrigin
    this.cluster = cluster
    this.store = store
    this.registry = registry
    this.clock = clock
    this.queue = queue
    this.writes = writes
    this.membersReady = membersReady
    this.onFailure = onFailure
  }

  /** Look for due schedules every SCHEDULE_INTERVAL_MS. */
  start (): void {
    this.timer = setInterval(() => { this.run().catch(this.onFailure) }, SCHEDULE_INTERVAL_MS)
    this.timer.unref()
  }

  /** A webhook changed or went: its next run is worked out again. */
  forget (account: string, webhookId: string): void {
    this.nextRuns.delete(slot(account, webhookId))
    this.walked.delete(slot(account, webhookId))
  }

  /** Run every schedule webhook and saved report delivery whose time has come. Resolves with the number of runs made. */
  run (): Promise<number> {
    this.scheduling ??= this.runOnce().finally(() => { this.scheduling = null })
    return this.scheduling
  }

  /** No more runs; resolves once the one under way ended. */
  async stop (): Promise<void> {
    this.stopped = true
    if (this.timer !== null) clearInterval(this.timer)
    await this.scheduling
  }

  private async runOnce (): Promise<number> {
    const nowMs = this.clock.nowMs()
    let runs = 0
    for (const webhook of this.registry.allWebhooks()) {
      const trigger = webhook.trigger
      if (trigger.kind !== 'schedule' || !webhook.enabled || this.stopped) continue
      const key = slot(webhook.account, webhook.id)
      let dueMs = this.nextRuns.get(key)
      if (dueMs === undefined) {
        // After a restart, the run after the last one made; a new schedule counts from now.
        const last = this.store.config.get([webhook.account, 'schedule-run', webhook.id]) as { lastRunMs: number } | undefined
        dueMs = nextRunMs(trigger.schedule, last?.lastRunMs ?? nowMs) ?? Number.MAX_SAFE_INTEGER
        this.nextRuns.set(key, dueMs)
      }
      if (nowMs < dueMs + webhook.delayMs) {
        await this.catchUp(webhook, trigger.segments, nowMs)
        continue
      }
      const cluster = this.cluster
      if (cluster === null) {
        await this.runSchedule(webhook, trigger.segments, dueMs, null)
      } else if (nowMs - dueMs - webhook.delayMs <= cluster.staleAfterMs) {
        // The partitions owned now are walked; one taken later gets its part from a catch-up. (A run
        // this late, a node back after a long stop, was the others' to make.)
        const walk = this.ownedPartitions(cluster, NONE)
        await this.runSchedule(webhook, trigger.segments, dueMs, walk)
        if (trigger.segments.length > 0) this.walked.set(key, { runMs: dueMs, partitions: walk })
      }
      await this.store.save(this.store.config, [webhook.account, 'schedule-run', webhook.id], { lastRunMs: dueMs })
      // Runs missed while down are not repeated one by one: a full sync supersedes them.
      this.nextRuns.set(key, nextRunMs(trigger.schedule, Math.max(dueMs, nowMs - webhook.delayMs)) ?? Number.MAX_SAFE_INTEGER)
      runs++
    }
    return runs + await this.runReports(nowMs)
  }

  /** Deliver the result of every saved report whose time has come; the number of runs made. */
  private async runReports (nowMs: number): Promise<number> {
    const before = this.reportRuns
    const next = this.reportRuns = new Map()
    let runs = 0
    for (const report of this.reports.scheduled()) {
      if (this.stopped) break
      const key = slot(report.account, report.id)
      let run = before.get(key)
      // After a restart, the run after the last one made; a report never run yet (or changed since) counts
      // from when it was saved, so a run due while the server was down is still made.
      if (run === undefined || run.source !== report.schedule.source) {
        const afterMs = Math.max(report.lastRunMs ?? 0, report.savedMs)
        run = { source: report.schedule.source, dueMs: nextRunMs(report.schedule, afterMs) ?? Number.MAX_SAFE_INTEGER }
      }
      next.set(key, run)
      if (nowMs < run.dueMs || !await this.runReport(report, run.dueMs)) continue
      // Runs missed while down are not repeated one by one: the result sent is as of now, which covers them.
      run.dueMs = nextRunMs(report.schedule, Math.max(run.dueMs, nowMs)) ?? Number.MAX_SAFE_INTEGER
      runs++
    }
    return runs
  }

  /** One run of a report: its result queued to its webhook, or the reason it was not kept. False: not now (the log is loading). */
  private async runReport (report: ScheduledReport, runMs: number): Promise<boolean> {
    // Cluster mode: one node makes the run (every node holds the whole log's columns, so any can).
    if (this.cluster !== null && !await this.cluster.claim(report.account, REPORT_CLAIM + report.id, runMs, 'all')) return true
    const at = new Date(runMs).toISOString()
    const failed = (error: string): LastDelivery => ({ at, status: 'failed', error })
    const webhook = this.reportWebhook(report)
    if (typeof webhook === 'string') {
      await this.reports.ran(report.account, report.id, { lastRunMs: runMs, lastDelivery: failed(webhook) })
      return true
    }
    const body = this.reports.resultJson(report.account, report.id)
    if (body === null) return false
    const record = scheduledRecord(this.store.allocateSeq(), webhook, { account: report.account }, runMs, this.clock.nowMs(), this.store.nodeId, this.idOrigin)
    record.item.body = body
    // Both writes are issued in this turn: lmdb-js commits the writes of one event turn in one transaction
    // (its README, "put"), so the run is made, or not at all.
    const written = this.writes.writeRecords([record])!
    const kept = this.reports.ran(report.account, report.id, { lastRunMs: runMs, lastDelivery: { at, status: 'queued', deliveryId: record.id } })
    await this.store.durable(written)
    await kept
    await this.queue.publish([record])
    return true
  }

  /** The report's webhook, or why its result cannot go there (it changed since the report was saved). */
  private reportWebhook (report: ScheduledReport): CompiledWebhook | string {
    const webhook = Array.from(this.registry.webhooksOf(report.account)).find(w => w.id === report.webhookId)
    if (webhook === undefined) return `The webhook ${report.webhookId} no longer exists.`
    if (!webhook.enabled) return `The webhook ${report.webhookId} is disabled.`
    if (webhook.native !== undefined || !webhook.hasBody) return `The webhook ${report.webhookId} is not a POST or PUT webhook.`
    return webhook
  }

  /** Cluster mode: the latest run's parts of the partitions this node took since it walked that run. */
  private async catchUp (webhook: CompiledWebhook, segments: readonly string[], nowMs: number): Promise<void> {
    const cluster = this.cluster
    const last = this.walked.get(slot(webhook.account, webhook.id))
    if (cluster === null || last === undefined || nowMs - last.runMs > cluster.staleAfterMs) return
    const taken = this.ownedPartitions(cluster, last.partitions)
    if (taken.size === 0) return
    await this.runSchedule(webhook, segments, last.runMs, taken)
    for (const partition of taken) last.partitions.add(partition)
  }

  /** The partitions this node owns now, but those in `except`. */
  private ownedPartitions (cluster: ScheduleCluster, except: ReadonlySet<number>): Set<number> {
    const owned = new Set<number>()
    for (let partition = 0; partition < cluster.partitions; partition++) if (!except.has(partition) && cluster.owns(partition)) owned.add(partition)
    return owned
  }

  /** Make a run; cluster mode: this node's parts of it, of the partitions in `walk` (null in embedded mode). */
  private async runSchedule (webhook: CompiledWebhook, segments: readonly string[], runMs: number, walk: ReadonlySet<number> | null): Promise<void> {
    const contexts: DeliveryContext[] = []
    const flush = async (): Promise<void> => {
      if (contexts.length === 0) return
      const nowMs = this.clock.nowMs()
      const records = contexts.splice(0).map(context => scheduledRecord(this.store.allocateSeq(), webhook, context, runMs, nowMs, this.store.nodeId, this.idOrigin))
      await this.store.durable(this.writes.writeRecords(records)!)
      await this.queue.publish(records)
    }
    const cluster = this.cluster
    /** Cluster mode: per partition met, whether this node claimed its part of this run. */
    const claimed = new Map<number, boolean>()
    if (segments.length === 0) {
      if (cluster !== null && !await cluster.claim(webhook.account, webhook.id, runMs, 'all')) return
      contexts.push({ account: webhook.account, event: 'schedule' })
    } else {
      // A schedule webhook saved just now starts the indexing of its segments' members: wait for it.
      await this.membersReady(webhook.account)
    }
    for (const segment of segments) {
      for (const key of this.store.members.getKeys({ start: [webhook.account, segment] })) {
        const [account, seg, kind, id] = key as [string, string, string, string]
        if (account !== webhook.account || seg !== segment) break
        if (cluster !== null) {
          // Another node's partition (this row is stale here), one given away before its first member
          // came (its new owner's), or a part another node claimed.
          const partition = cluster.partitionOf(account, id)
          if (!walk!.has(partition)) continue
          let mine = claimed.get(partition)
          if (mine === undefined) {
            mine = cluster.owns(partition) && await cluster.claim(account, webhook.id, runMs, partition)
            claimed.set(partition, mine)
          }
          if (!mine) continue
        }
        const context: DeliveryContext = { account, audience: segment, event: 'schedule' }
        if (kind === 'visitor') context.visitorId = id
        else context.profileId = id
        contexts.push(context)
        if (contexts.length === SCHEDULE_PAGE_MAX) await flush()
      }
    }
    await flush()
  }
}

const NONE: ReadonlySet<number> = new Set()
/** Before a report's id in its runs' claims: no webhook's id has it (NAME_PATTERN), so the two never meet. */
const REPORT_CLAIM = '#report:'
