// A node of the forwarding tests (test/cluster/forwarder.test.ts, forward-batch.test.ts): a Forwarder on
// its own NATS connection, serving what it is forwarded through a handler a test may set, and keeping the
// urls it ran in order.

import { connect, type NatsConnection } from '@nats-io/transport-node'
import { Forwarder, type ForwardedReply, type ForwardedRequest, type ForwarderOptions } from '../../src/cluster/forwarder.js'

export interface ForwardNode<Id extends string> {
  id: Id
  nc: NatsConnection
  forwarder: Forwarder
  /** Request urls this node ran, in order. */
  ran: string[]
  /** Set by a test: how the handler answers (default: the test's `answer`). */
  handler: ((request: ForwardedRequest) => Promise<ForwardedReply>) | null
}

/** Connects to `servers` and serves: by `node.handler` when a test set one, else by `answer`. */
export async function startForwardNode<Id extends string> (id: Id, servers: string, options: Omit<ForwarderOptions, 'nc'>,
  answer: (node: Id, request: ForwardedRequest) => ForwardedReply): Promise<ForwardNode<Id>> {
  const nc = await connect({ servers })
  const forwarder = new Forwarder({ nc, ...options })
  const node: ForwardNode<Id> = { id, nc, forwarder, ran: [], handler: null }
  forwarder.serve(async forwarded => {
    node.ran.push(forwarded.url)
    return node.handler !== null ? node.handler(forwarded) : answer(id, forwarded)
  })
  return node
}
