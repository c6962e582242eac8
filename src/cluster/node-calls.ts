// Calls from one node to a named other node (issue 17, "Admin listings from any node"): what only that
// node can answer, because it lives in its own LMDB (its delivery records), asked over NATS
// request/reply. Unlike the forwarder (one subject per partition, whoever owns it), a call names its
// node: subject `beacon.<cluster>.node.<node id>.<method>`, subscribed by that node once it serves the
// method (`serve`).
//
// A call is sent once and waits at most `budgetMs` (5 s by default) for the answer: it is not resent
// after a timeout (a method may change state: a replay must not run twice). It is resent only on "no
// responders" (the node has not subscribed yet: it is starting), pausing 10 ms doubling to 100 ms, within
// the same budget. A node that does not answer in time gets the caller a 503 `unavailable` with
// `Retry-After: 1`; a refusal at the called node (an ApiError: 400, 404…) comes back as the same
// ApiError. Payloads and answers are msgpack, one NATS message each (at most the servers' max_payload:
// the methods keep their answers well below it).

import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node'
import { Packr } from 'msgpackr'
import { ApiError, type ErrorItem } from '../errors.js'
import { log } from '../log.js'
import { invalidArgument, positiveInteger } from './errors.js'
import { NO_RESPONDERS, Requests } from './requests.js'

/** Runs a call at the called node; throws an ApiError to refuse it. */
export type NodeCallHandler = (payload: unknown) => Promise<unknown>

export interface NodeCallsOptions {
  nc: NatsConnection
  /** The cluster's name: a subject token. */
  cluster: string
  /** This node's id (BEACON_NODE_ID). */
  nodeId: string
  /** The live nodes' ids (the members), this node among them. */
  live: () => string[]
  /** How long a call waits for its answer before 503 unavailable; default 5000. */
  budgetMs?: number
}

/** What goes back: the handler's answer, or its refusal. */
type WireReply = { k: 'r', v: unknown } | { k: 'e', i: ErrorItem[] }

// Plain msgpack (no records extension), as the forwarder and the changelog.
const packr = new Packr({ useRecords: false, moreTypes: false })
const NODE_ID = /^[A-Za-z0-9_-]+$/
const METHOD = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/
const BACKOFF_FIRST_MS = 10
const BACKOFF_MAX_MS = 100

export class NodeCalls {
  readonly nodeId: string
  private readonly nc: NatsConnection
  private readonly requests: Requests
  private readonly prefix: string
  private readonly live: () => string[]
  private readonly budgetMs: number
  private readonly subscriptions: Subscription[] = []
  private closed = false

  constructor (options: NodeCallsOptions) {
    if (!NODE_ID.test(options.cluster)) throw invalidArgument('cluster', 'must be letters, digits, - or _')
    if (!NODE_ID.test(options.nodeId)) throw invalidArgument('nodeId', 'must be letters, digits, - or _')
    this.nc = options.nc
    this.requests = new Requests(options.nc)
    this.nodeId = options.nodeId
    this.prefix = `beacon.${options.cluster}.node`
    this.live = options.live
    this.budgetMs = positiveInteger('budgetMs', options.budgetMs ?? 5000)
  }

  subject (node: string, method: string): string {
    return `${this.prefix}.${node}.${method}`
  }

  /** The live nodes' ids, sorted, this node among them. */
  nodes (): string[] {
    return this.live()
  }

  /** Answer calls of `method` made to this node through `handler` from now on. */
  serve (method: string, handler: NodeCallHandler): void {
    if (!METHOD.test(method)) throw invalidArgument('method', 'must be dot-separated letters, digits, - or _')
    if (this.closed) return
    this.subscriptions.push(this.nc.subscribe(this.subject(this.nodeId, method), {
      callback: (error, msg) => { if (error === null) this.answer(method, handler, msg) },
    }))
  }

  /**
   * `method` run at `node` with `payload`: its answer; rejects with the node's own ApiError when it
   * refused, or with 503 `unavailable` (Retry-After: 1) when it did not answer within the budget.
   */
  async call (node: string, method: string, payload: unknown): Promise<unknown> {
    if (!NODE_ID.test(node)) throw invalidArgument('node', 'must be letters, digits, - or _')
    const deadline = Date.now() + this.budgetMs
    const subject = this.subject(node, method)
    const data = packr.pack(payload)
    let backoffMs = BACKOFF_FIRST_MS
    for (;;) {
      const remaining = deadline - Date.now()
      if (remaining <= 0) break
      let msg: Msg
      try {
        msg = await this.requests.request(subject, data, remaining)
      } catch (error) {
        // Not subscribed yet (a node starting): again, within the budget. Anything else (a timeout, the
        // connection lost) is the end: the call may have run there, it must not run twice.
        if (error !== NO_RESPONDERS) break
        await sleep(Math.min(backoffMs, Math.max(0, deadline - Date.now())))
        backoffMs = Math.min(backoffMs * 2, BACKOFF_MAX_MS)
        continue
      }
      const reply = packr.unpack(msg.data) as WireReply
      if (reply.k === 'r') return reply.v
      throw ApiError.of(reply.i)
    }
    throw new ApiError('unavailable', `The cluster node ${node} did not answer within ${this.budgetMs} ms; retry.`, undefined, { 'Retry-After': '1' })
  }

  /** Stop answering (the node leaves); calls already delivered are answered. */
  async close (): Promise<void> {
    if (this.closed) return
    this.closed = true
    const subscriptions = this.subscriptions.splice(0)
    await Promise.all(subscriptions.map(subscription => subscription.drain().catch(() => {})))
  }

  private answer (method: string, handler: NodeCallHandler, msg: Msg): void {
    let payload: unknown
    try {
      payload = packr.unpack(msg.data)
    } catch (error) {
      log.warn({ err: error, method }, 'node call not decodable; dropped')
      return
    }
    handler(payload).then(value => ({ k: 'r', v: value }) as WireReply, (error: unknown) => {
      if (error instanceof ApiError) return { k: 'e', i: error.items } as WireReply
      // Handlers refuse with an ApiError; anything else is a bug, logged here where it happened.
      log.error({ err: error, method }, 'node call failed')
      return { k: 'e', i: [{ code: 'internal', message: 'Unexpected server error.' }] } as WireReply
    }).then(reply => {
      const bytes = packr.pack(reply)
      const maxPayload = this.nc.info?.max_payload ?? Infinity
      if (bytes.byteLength <= maxPayload) return msg.respond(bytes)
      log.error({ method, bytes: bytes.byteLength, maxPayload }, 'node call answer larger than the NATS max_payload')
      return msg.respond(packr.pack({ k: 'e', i: [{ code: 'internal', message: `The answer (${bytes.byteLength} bytes) is larger than the NATS max_payload (${maxPayload} bytes).` }] } satisfies WireReply))
    }).catch(() => {
      // The connection is closing: the caller times out.
    })
  }
}

function sleep (ms: number): Promise<void> {
  return new Promise(resolve => setTimeout(resolve, ms))
}
