// Bulk imports (docs/events.md, "Bulk import"): an account's NDJSON file of profiles, visitors, links
// and historical events, applied as a job. The body is kept on disk while the job runs
// (<data folder>/imports/<id>.ndjson, fsynced before the upload is answered) and the job's record in
// the store's `imports` db; after a restart every job not finished resumes from its last committed row
// (the record keeps the byte offset past it).
//
// Applying: the file is read line by line (never whole); each step sends at most IMPORT_STEP_ROWS rows
// to their actors, yielding the event loop whenever a turn has run IMPORT_TURN_MS (a live request waits
// for no longer a turn), waits for them to be durable, then commits the job's progress, and pauses
// before the next one: as long as the step took while nothing else used the event loop during the last
// pause, IMPORT_PAUSE_LIVE_FACTOR times as long when something did (live traffic), so that live requests
// have the event loop at least half the time while an import runs, and three quarters of it while
// they are there to use it (importPauseMs). One job applies one step at a time, and at most
// BEACON_IMPORTS_RUNNING_MAX jobs run at once (the others wait, queued): an import takes a bounded
// share of the process whatever its size.
//
// Idempotent: each row carries a claim keyed by its messageId or, without one, by a hash of the row
// (IMPORT_KEY_PREFIX, in the actors' Idempotency-Key records, kept 24 hours): a row applied again (a
// resumed step, the same file imported twice) is counted as a duplicate, not applied twice.

import { createHash } from 'node:crypto'
import { mkdirSync, readdirSync, rmSync } from 'node:fs'
import { open } from 'node:fs/promises'
import { join } from 'node:path'
import type { ErrorItem } from '../errors.js'
import { ApiError } from '../errors.js'
import type { Clock } from '../clock.js'
import type { Store } from '../store/store.js'
import type { ActorSender } from '../../actors/actor-router.js'
import type { EventBody, VisitorKind } from '../../actors/visitor.js'
import type { ProfileKind } from '../../actors/profile.js'
import type { AttributeValue } from '../../actors/entity.js'
import type { IdempotencyClaim } from '../../actors/idempotent.js'
import { importLines } from './import-lines.js'
import { newJobId } from '../cluster/node-jobs.js'

/** Rows sent to their actors in one step, between two commits of the job's progress. */
export const IMPORT_STEP_ROWS = 100
/**
 * The longest a step runs in one turn of the event loop before it yields (then goes on in the next):
 * what a live request waits at most behind an import's turn.
 */
export const IMPORT_TURN_MS = 1
/** The longest pause between two steps (a step slowed by a stalled disk does not stall the job as long again). */
export const IMPORT_PAUSE_MAX_MS = 100
/**
 * The pause after a step, in times the step's length, when the event loop was used by others during the
 * last pause (live requests): the import then takes at most a quarter of the loop.
 */
export const IMPORT_PAUSE_LIVE_FACTOR = 3
/** The share of the last pause the event loop spent working (eventLoopUtilization) from which the traffic counts as live. */
export const IMPORT_LIVE_LOOP_SHARE = 0.1
/** How long a step waits before it sends again the rows no node could take (ImportJobsDeps.retryMs). */
export const IMPORT_RETRY_MS = 500
/** Refusals a job keeps (with their line numbers); the count goes on. */
export const IMPORT_REFUSALS_KEPT = 100
/** A line longer than this is refused without being parsed. */
export const IMPORT_LINE_MAX_BYTES = 256 * 1024
/** What starts the Idempotency record key of an imported row (a control character, as batches' messageIds). */
export const IMPORT_KEY_PREFIX = '\u0002imp:'

/** One row, parsed and checked (src/http/import-rows.ts), for its actor. */
export type ImportRow =
  | { type: 'profile', profileId: string, attributes: Record<string, AttributeValue | null>, messageId?: string }
  | { type: 'visitor', visitorId: string, attributes: Record<string, AttributeValue | null>, messageId?: string }
  | { type: 'link', visitorId: string, profileId: string, messageId?: string }
  | { type: 'event', event: EventBody, atMs: number, messageId?: string }

/** A line of the file as the job's parser sees it: the row, or why it is refused. */
export type RowParser = (account: string, text: string) => ImportRow | ErrorItem

export type ImportState = 'queued' | 'running' | 'done' | 'failed'

export interface ImportRefusal {
  line: number
  code: string
  message: string
  field?: string
}

/** A job's record, as stored and as GET …/imports/{id} shows it. */
export interface ImportJob {
  id: string
  account: string
  state: ImportState
  /** Webhooks, destinations and audience changes for the imported rows (?deliver=true). */
  deliver: boolean
  createdAt: string
  finishedAt: string | null
  /** The file's size. */
  bytes: number
  /** Lines read and committed (the next step starts after them). */
  rowsRead: number
  applied: number
  /** Rows applied before (their messageId or hash): counted once. */
  duplicates: number
  refused: number
  /** The first IMPORT_REFUSALS_KEPT refusals. */
  refusals: ImportRefusal[]
  /** Why a failed job stopped. */
  error: string | null
  /** Bytes of the file past the last committed line. */
  offset: number
}

export interface ImportJobsDeps {
  store: Store
  /** The actors' runtime (embedded mode), or the router that sends each row to its partition's owner (cluster mode). */
  actors: ActorSender
  visitors: VisitorKind
  profiles: ProfileKind
  clock: Clock
  /** Where the bodies are kept while their jobs run. */
  dir: string
  parse: RowParser
  runningMax: number
  onError: (error: unknown, job: ImportJob) => void
  /** Cluster mode: this node's id, named in its jobs' ids (src/cluster/node-jobs.ts). */
  nodeId?: string | null
  /** How long a step waits before it sends again the rows no node could take (a partition changing owner). */
  retryMs?: number
}

/** What the admin routes use: this node's imports (ImportJobs), or the cluster's (ClusterImports). */
export interface ImportService {
  create: (account: string, body: AsyncIterable<Buffer>, deliver: boolean) => Promise<ImportJob>
  get: (account: string, id: string) => ImportJob | null | Promise<ImportJob | null>
  list: (account: string) => ImportJob[] | Promise<ImportJob[]>
}

/** Refusals of a row that say nothing of the row (cluster mode: its partition changing owner): sent again. */
const RETRIED = new Set(['unavailable', 'partition_moved', 'write_unconfirmed'])

export class ImportJobs implements ImportService {
  private readonly deps: ImportJobsDeps
  private readonly queue: string[] = []
  private running = 0
  private stopped = false
  private readonly active = new Set<Promise<void>>()
  /** Told when a job finishes (tests, the bench). */
  onFinished: ((job: ImportJob) => void) | null = null

  constructor (deps: ImportJobsDeps) {
    this.deps = deps
    mkdirSync(deps.dir, { recursive: true, mode: 0o700 })
  }

  /** Resume the jobs a restart interrupted; remove bodies no job holds (an upload cut by the restart). */
  start (): void {
    const pending: ImportJob[] = []
    const kept = new Set<string>()
    for (const { value } of this.deps.store.imports.getRange({})) {
      const job = value as ImportJob
      if (job.state === 'queued' || job.state === 'running') {
        pending.push(job)
        kept.add(`${job.id}.ndjson`)
      }
    }
    for (const name of readdirSync(this.deps.dir)) if (!kept.has(name)) rmSync(join(this.deps.dir, name), { force: true })
    pending.sort((a, b) => a.createdAt.localeCompare(b.createdAt))
    for (const job of pending) this.enqueue(job)
  }

  /**
   * Take an upload: its chunks written to disk as they arrive, fsynced, then the job recorded (durable)
   * and queued. Nothing is recorded for an upload that failed (its file is removed).
   */
  async create (account: string, body: AsyncIterable<Buffer>, deliver: boolean): Promise<ImportJob> {
    const id = newJobId(this.deps.nodeId ?? null)
    const path = this.pathOf(id)
    const file = await open(path, 'wx', 0o600)
    let bytes = 0
    try {
      for await (const chunk of body) {
        await file.write(chunk)
        bytes += chunk.byteLength
      }
      await file.sync()
    } catch (error) {
      await file.close()
      rmSync(path, { force: true })
      throw error
    }
    await file.close()
    if (bytes === 0) {
      rmSync(path, { force: true })
      throw new ApiError('invalid_field', 'The body is empty: send one JSON object a line (docs/events.md, "Bulk import").')
    }
    const job: ImportJob = {
      id, account, state: 'queued', deliver, createdAt: new Date(this.deps.clock.nowMs()).toISOString(), finishedAt: null,
      bytes, rowsRead: 0, applied: 0, duplicates: 0, refused: 0, refusals: [], error: null, offset: 0,
    }
    try {
      await this.save(job)
    } catch (error) {
      rmSync(path, { force: true })
      throw error
    }
    this.enqueue(job)
    return job
  }

  get (account: string, id: string): ImportJob | null {
    return (this.deps.store.imports.get([account, id]) as ImportJob | undefined) ?? null
  }

  /** The account's jobs, newest first. */
  list (account: string): ImportJob[] {
    const jobs: ImportJob[] = []
    for (const { value } of this.deps.store.imports.getRange({ start: [account], end: [account, '\uffff'] })) jobs.push(value as ImportJob)
    return jobs.sort((a, b) => b.createdAt.localeCompare(a.createdAt))
  }

  /** Stop taking steps; the jobs under way stop after their current step (resumed at the next start). */
  async stop (): Promise<void> {
    this.stopped = true
    await Promise.all([...this.active])
  }

  private pathOf (id: string): string {
    return join(this.deps.dir, `${id}.ndjson`)
  }

  private async save (job: ImportJob): Promise<void> {
    await this.deps.store.durable(this.deps.store.imports.put([job.account, job.id], job))
  }

  private enqueue (job: ImportJob): void {
    this.queue.push(`${job.account}/${job.id}`)
    this.next()
  }

  private next (): void {
    while (!this.stopped && this.running < this.deps.runningMax && this.queue.length > 0) {
      const [account, id] = this.queue.shift()!.split('/') as [string, string]
      const job = this.get(account, id)
      if (job === null) continue
      this.running++
      const run = this.run(job).catch(async (error: unknown) => {
        this.deps.onError(error, job)
        if (this.stopped) return
        job.state = 'failed'
        job.error = error instanceof Error ? error.message : String(error)
        await this.finish(job).catch((failure: unknown) => this.deps.onError(failure, job))
      }).finally(() => {
        this.active.delete(run)
        this.running--
        this.next()
      })
      this.active.add(run)
    }
  }

  private async run (job: ImportJob): Promise<void> {
    if (job.state !== 'running') {
      job.state = 'running'
      await this.save(job)
    }
    const step: Array<{ line: number, text: string }> = []
    let end = job.offset
    let line = job.rowsRead
    // The event loop's use during the last pause (0 before the first): what the next pause's length follows.
    let pauseLoopShare = 0
    for await (const read of importLines(this.pathOf(job.id), job.offset, IMPORT_LINE_MAX_BYTES)) {
      line++
      end = read.end
      if (read.text === null) refuse(job, line, { code: 'invalid_field', message: `The line is longer than ${IMPORT_LINE_MAX_BYTES} bytes.` })
      else if (read.text.trim() !== '') step.push({ line, text: read.text })
      if (step.length >= IMPORT_STEP_ROWS) {
        const startMs = performance.now()
        await this.apply(job, step.splice(0), line, end)
        if (this.stopped) return
        // A bounded share: idle while live requests have the loop (longer while there are some), at least a turn.
        const loopBefore = performance.eventLoopUtilization()
        await new Promise(resolve => setTimeout(resolve, importPauseMs(performance.now() - startMs, pauseLoopShare)))
        pauseLoopShare = performance.eventLoopUtilization(loopBefore).utilization
      }
    }
    await this.apply(job, step, line, end)
    if (this.stopped) return
    job.state = 'done'
    await this.finish(job)
  }

  /**
   * One step: the rows sent, a turn of the event loop at a time, each outcome counted, then the progress
   * committed. Rows no node could take (503: in cluster mode, a partition changing owner) are sent again
   * after a pause until they are taken or refused: a row is idempotent (its claim), so one that was in
   * fact applied is then counted as a duplicate.
   */
  private async apply (job: ImportJob, rows: ReadonlyArray<{ line: number, text: string }>, line: number, end: number): Promise<void> {
    const { parse } = this.deps
    let sends: RowSend[] = []
    let turnStartMs = performance.now()
    for (const { line: at, text } of rows) {
      if (performance.now() - turnStartMs >= IMPORT_TURN_MS) {
        await new Promise(resolve => setImmediate(resolve))
        turnStartMs = performance.now()
      }
      const row = parse(job.account, text)
      if (!('type' in row)) {
        refuse(job, at, row)
        continue
      }
      const send: RowSend = { line: at, row, claim: claimOf(row, text), outcome: null }
      this.send(job, send)
      sends.push(send)
    }
    for (;;) {
      const again: RowSend[] = []
      for (const send of sends) {
        const result = await send.outcome!
        if (result.status === 'fulfilled') {
          if (send.claim?.replayed === true) job.duplicates++
          else job.applied++
        } else if (result.reason instanceof ApiError && RETRIED.has(result.reason.items[0]!.code)) {
          again.push(send)
        } else if (result.reason instanceof ApiError && result.reason.status < 500) {
          // A refusal of the row itself (a reused messageId, a full entity): counted.
          refuse(job, send.line, result.reason.items[0]!)
        } else {
          // Anything else stops the job.
          throw result.reason
        }
      }
      if (again.length === 0 || this.stopped) break
      await new Promise(resolve => setTimeout(resolve, this.deps.retryMs ?? IMPORT_RETRY_MS))
      for (const send of again) this.send(job, send)
      sends = again
    }
    if (this.stopped) return
    job.rowsRead = line
    job.offset = end
    await this.save(job)
  }

  /** Sends the row to its actor; its outcome taken at once (a row refused while the step yields would be an unhandled rejection). */
  private send (job: ImportJob, send: RowSend): void {
    const { actors, visitors, profiles, clock } = this.deps
    const { row, claim } = send
    const quiet = !job.deliver
    let sending: Promise<unknown>
    switch (row.type) {
      case 'profile':
        sending = actors.send(profiles, job.account, row.profileId, { type: 'attributes', attributes: row.attributes, idem: claim, quiet })
        break
      case 'visitor':
        sending = actors.send(visitors, job.account, row.visitorId, { type: 'attributes', attributes: row.attributes, idem: claim, quiet })
        break
      case 'link':
        sending = actors.send(visitors, job.account, row.visitorId, { type: 'link', profileId: row.profileId, quiet })
        break
      case 'event':
        sending = actors.send(visitors, job.account, row.event.visitorId, { type: 'event', event: row.event, nowMs: clock.nowMs(), idem: claim, track: true, imported: { atMs: row.atMs, quiet } })
        break
    }
    send.outcome = settle(sending)
  }

  private async finish (job: ImportJob): Promise<void> {
    job.finishedAt = new Date(this.deps.clock.nowMs()).toISOString()
    await this.save(job)
    rmSync(this.pathOf(job.id), { force: true })
    this.onFinished?.(job)
  }
}

/**
 * How long to pause after a step that took `stepMs`, given the share of the last pause in which the
 * event loop worked for others (`loopShare`, 0 to 1): as long as the step with the loop otherwise idle,
 * IMPORT_PAUSE_LIVE_FACTOR times as long with live work; never more than IMPORT_PAUSE_MAX_MS.
 */
export function importPauseMs (stepMs: number, loopShare: number): number {
  const factor = loopShare >= IMPORT_LIVE_LOOP_SHARE ? IMPORT_PAUSE_LIVE_FACTOR : 1
  return Math.min(IMPORT_PAUSE_MAX_MS, stepMs * factor)
}

function refuse (job: ImportJob, line: number, error: ErrorItem | { code: string, message: string, field?: string }): void {
  job.refused++
  if (job.refusals.length >= IMPORT_REFUSALS_KEPT) return
  const refusal: ImportRefusal = { line, code: error.code, message: error.message }
  if (error.field !== undefined) refusal.field = error.field
  job.refusals.push(refusal)
}

/** A promise's outcome as Promise.allSettled gives it, its handlers attached at once. */
function settle (promise: Promise<unknown>): Promise<PromiseSettledResult<unknown>> {
  return promise.then(value => ({ status: 'fulfilled', value }) as const, (reason: unknown) => ({ status: 'rejected', reason }) as const)
}

/** A row of a step, as sent to its actor. */
interface RowSend {
  line: number
  row: ImportRow
  claim: IdempotencyClaim | undefined
  outcome: Promise<PromiseSettledResult<unknown>> | null
}

/** A row's claim: its messageId, else the hash of its line (a link needs none: linking again changes nothing). */
function claimOf (row: ImportRow, text: string): IdempotencyClaim | undefined {
  if (row.type === 'link') return undefined
  const fingerprint = createHash('sha256').update(text.trim()).digest('base64url')
  return { key: IMPORT_KEY_PREFIX + (row.messageId ?? fingerprint), fingerprint, replayed: false }
}
