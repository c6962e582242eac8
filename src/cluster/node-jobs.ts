// Jobs that run on one node of a cluster (replays of the event log, bulk imports): started on the node
// that took the request, kept in its data folder, resumed there after a restart. Their ids name that
// node, `<node id>:<uuid>`, so any node reads or cancels one with a call to it (src/cluster/node-calls.ts);
// an embedded server's ids are the bare UUID. A node that is down answers nothing: asking for its jobs
// is a 503 with Retry-After until it is back.

import { randomUUID } from 'node:crypto'
import { ApiError, type ErrorCode } from '../errors.js'
import type { PeerCalls } from './node-listing.js'

/** A job's id as a route takes it: a UUID, in cluster mode behind its node's id and a colon. */
export const NODE_JOB_ID = /^(?:[A-Za-z0-9_-]{1,64}:)?[0-9a-f-]{36}$/

/** A new job's id: `<node id>:<uuid>`, or the UUID alone without a node (embedded mode). */
export function newJobId (nodeId: string | null): string {
  return nodeId === null ? randomUUID() : `${nodeId}:${randomUUID()}`
}

/**
 * The node a job's id names: `notFound` when it names none (an embedded id, or malformed); 503
 * `unavailable` (Retry-After: 1) when it names a node other than `self` that is not live.
 */
export function jobNode (id: string, calls: PeerCalls, self: string, notFound: ErrorCode): string {
  const node = nodeOfJob(id)
  if (node === null) throw new ApiError(notFound)
  if (node !== self && !calls.nodes().includes(node)) {
    throw new ApiError('unavailable', `The cluster node ${node}, which runs this job, is not live: retry once it is back.`, undefined, { 'Retry-After': '1' })
  }
  return node
}

/** The node a job's id names; null for an embedded id (or a malformed one). */
export function nodeOfJob (id: string): string | null {
  const at = id.indexOf(':')
  return at <= 0 || !NODE_JOB_ID.test(id) ? null : id.slice(0, at)
}
