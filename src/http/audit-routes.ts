// The audit log of an account, newest first, paged by cursor (owners and the admin key). In cluster
// mode every live node's entries (src/audit/cluster-audit.ts), with an opaque cursor.

import Type from 'typebox'
import { ApiError } from '../errors.js'
import { AUDIT_PAGE_MAX, type AuditEntry, type AuditLog } from '../audit/audit-log.js'
import type { Catalogs } from '../catalog/catalogs.js'
import { accountParam } from './access.js'
import { json, type RouteDefinition } from './route.js'
import * as R from './reply-schemas.js'

/** The audit log across the nodes of a cluster, listed with an opaque cursor. */
export interface ClusterAuditLog {
  /** `cursor`: '' for the first page, else the `next` of the previous one; a malformed one is 400 invalid_field. */
  list: (account: string, limit: number, cursor: string) => Promise<{ entries: AuditEntry[], next: string | null }>
}

export function auditRoutes ({ catalogs, audit, clusterAudit = null }: { catalogs: Catalogs, audit: AuditLog, clusterAudit?: ClusterAuditLog | null }): RouteDefinition[] {
  return [{
    method: 'get', pattern: '/admin/accounts/:account/audit', body: false, role: 'owner',
    doc: {
      summary: 'The audit log, newest first',
      description: 'One entry per change made through the admin API. In cluster mode every live node\'s entries, merged newest first (ties by node id, then seq): following `next` lists each entry of the cluster once, and an entry\'s id is `<node id>:<seq>`; a node that does not answer within 5 s makes it a 503 `unavailable` (Retry-After: 1).',
      tag: 'Audit',
      query: [
        { name: 'limit', description: `Page size (default 50, at most ${AUDIT_PAGE_MAX}).`, schema: Type.Integer({ minimum: 1, maximum: AUDIT_PAGE_MAX }) },
        { name: 'cursor', description: 'The `next` of the previous page, passed back as it is (cluster mode: an opaque string).', schema: Type.String() },
      ],
      ok: json(200, 'A page of entries.', R.AuditPage), errors: ['account_not_found', 'invalid_field', 'unavailable'],
    },
    async handler (request) {
      const account = accountParam(request, catalogs)
      const query = new URLSearchParams(request.query)
      const rawLimit = query.get('limit')
      const limit = rawLimit === null || rawLimit === '' ? 50 : Number(rawLimit)
      if (!Number.isInteger(limit) || limit < 1 || limit > AUDIT_PAGE_MAX) throw new ApiError('invalid_field', `limit must be a whole number from 1 to ${AUDIT_PAGE_MAX}.`, '/limit')
      const cursor = query.get('cursor')
      if (clusterAudit !== null) return { status: 200, body: await clusterAudit.list(account, limit, cursor ?? '') }
      return { status: 200, body: audit.list(account, limit, cursor === '' ? null : cursor) }
    },
  }]
}
