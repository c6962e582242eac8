// Cluster mode: erasing a person removes their delivery records on every node. A record lives in the
// LMDB of the node that relayed it (its holder), any node of the cluster, so the erasure of a person's
// records (history.ts `forget`) must run on all of them, including one that is down at the time.
//
// The node running the erase stores the erasure (account, profile ids, visitor ids) in the cluster's
// erasure stream (jetstream/erasure-stream.ts: kept 30 days, read by every node through its own
// durable consumer), then forgets its own records, and only then is the request answered: what it
// reports (its own count) is done, and the rest is durably on its way. JetStream not storing it within
// ERASURE_STORE_WAIT_MAX_MS (NATS away) answers 503 `unavailable` with Retry-After before anything is
// said done (the person's state is erased by then: a retry stores the erasure again). Every other node
// applies each erasure it reads the same way (forget is idempotent: a message read twice removes
// nothing more) and acks it once its removals are committed; a node that was down applies what was
// stored meanwhile when it is back. The writing process skips its own messages: it applied them before
// answering (a restart is another process, and applies them again).

import { ApiError } from '../errors.js'
import { log } from '../log.js'
import type { DeliveryHub } from './hub.js'
import { decodeErasure } from './jetstream/erasure-stream.js'
import { withTimeout } from './jetstream/wait.js'
import { ERASURE_STORE_WAIT_MAX_MS } from './limits.js'

/** Where erasures are stored for every node, and read by this one (jetstream/erasure-stream.ts). */
export interface ErasureTransport {
  /** This process's id, the `origin` of what it stores. */
  readonly origin: string
  publish (account: string, profileIds: readonly string[], visitorIds: readonly string[]): Promise<void>
  consume (apply: (messages: readonly Uint8Array[]) => Promise<void>): void
  stop (): Promise<void>
}

export interface ClusterErasuresOptions {
  hub: Pick<DeliveryHub, 'forget'>
  transport: ErasureTransport
}

export class ClusterErasures {
  private readonly hub: Pick<DeliveryHub, 'forget'>
  private readonly transport: ErasureTransport

  constructor ({ hub, transport }: ClusterErasuresOptions) {
    this.hub = hub
    this.transport = transport
  }

  /** Apply the erasures stored by other nodes (and by earlier runs of this one), from now on. */
  start (): void {
    this.transport.consume(messages => this.apply(messages))
  }

  /**
   * Erasure: the person's delivery records on every node. Resolves once the erasure is stored for every
   * node and this node's records are removed, with how many went here.
   */
  async forget (account: string, profileIds: ReadonlySet<string>, visitorIds: ReadonlySet<string>): Promise<number> {
    const stored = await withTimeout(this.transport.publish(account, [...profileIds], [...visitorIds]).then(() => true), ERASURE_STORE_WAIT_MAX_MS)
    if (stored !== true) {
      log.warn({}, 'an erasure of delivery records was not stored by JetStream in time; answered 503')
      throw new ApiError('unavailable', 'The cluster cannot store the erasure of delivery records right now; retry shortly.', undefined, { 'Retry-After': '1' })
    }
    return await this.hub.forget(account, profileIds, visitorIds)
  }

  stop (): Promise<void> {
    return this.transport.stop()
  }

  /** Erasure messages read from the stream, applied one after the other. Resolves once their removals are committed. */
  private async apply (messages: readonly Uint8Array[]): Promise<void> {
    for (const data of messages) {
      const erasure = decodeErasure(data)
      if (erasure === null) {
        log.error({}, 'an undecodable message in the erasure stream; dropped')
        continue
      }
      if (erasure.origin === this.transport.origin) continue
      await this.hub.forget(erasure.account, new Set(erasure.profileIds), new Set(erasure.visitorIds))
    }
  }
}
