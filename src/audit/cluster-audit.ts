// The audit log of a whole cluster (cluster mode): an entry is written in the LMDB of the node that
// made the change (the node called, or the partition's owner for a request forwarded to it), so the
// node that takes a listing asks every live node for its page over NATS and merges them newest first
// (time, ties by node id, then seq newest first) with src/cluster/node-listing.ts, whose opaque cursor
// holds every node's position: following `next` lists each entry of the cluster exactly once. An
// entry's id names its node: `<node id>:<seq>`. A node that does not answer makes the listing a 503
// (never a partial page).

import { listAcrossNodes, sizedItems, type PeerCalls } from '../cluster/node-listing.js'
import type { AuditEntry, AuditLog } from './audit-log.js'

export interface ClusterAuditOptions {
  audit: Pick<AuditLog, 'page'>
  calls: PeerCalls
}

interface PageCall { account: string, before: number, limit: number }
interface PageAnswer { entries: AuditEntry[], more: boolean }

export class ClusterAudit {
  private readonly calls: PeerCalls

  constructor ({ audit, calls }: ClusterAuditOptions) {
    this.calls = calls
    calls.serve('audit.list', async payload => {
      const { account, before, limit } = payload as PageCall
      const page = audit.page(account, before, limit)
      const entries = sizedItems(page.entries, entry => JSON.stringify(entry).length)
      return { entries: [...entries], more: page.more || entries.length < page.entries.length } satisfies PageAnswer
    })
  }

  /** A page of the cluster's audit log, newest first; `cursor` is the previous `next` ('' for the first page). */
  async list (account: string, limit: number, cursor: string): Promise<{ entries: AuditEntry[], next: string | null }> {
    const { items, next } = await listAcrossNodes<AuditEntry>({
      calls: this.calls, cursor, field: 'cursor', limit,
      page: async (node, position) => {
        const call: PageCall = { account, before: position === 0 ? Number.MAX_SAFE_INTEGER : position, limit }
        const page = await this.calls.call(node, 'audit.list', call) as PageAnswer
        return { items: page.entries, more: page.more }
      },
      before: newer,
      positionOf: entry => Number(entry.id),
    })
    return { entries: items.map(({ node, item }) => ({ ...item, id: `${node}:${item.id}` })), next }
  }
}

/** Newest first: time, then node id, then seq. */
function newer (a: AuditEntry, aNode: string, b: AuditEntry, bNode: string): boolean {
  if (a.at !== b.at) return a.at > b.at
  if (aNode !== bNode) return aNode < bNode
  return Number(a.id) > Number(b.id)
}
