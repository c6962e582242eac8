// The audit log of an account, newest first, paged by cursor (owners and the admin key).

import Type from 'typebox'
import { ApiError } from '../errors.js'
import { AUDIT_PAGE_MAX, type AuditLog } from '../audit/audit-log.js'
import type { Catalogs } from '../catalog/catalogs.js'
import { accountParam } from './access.js'
import { json, type RouteDefinition } from './route.js'
import * as R from './reply-schemas.js'

export function auditRoutes ({ catalogs, audit }: { catalogs: Catalogs, audit: AuditLog }): RouteDefinition[] {
  return [{
    method: 'get', pattern: '/admin/accounts/:account/audit', body: false, role: 'owner',
    doc: {
      summary: 'The audit log, newest first', description: 'One entry per change made through the admin API.', tag: 'Audit',
      query: [
        { name: 'limit', description: `Page size (default 50, at most ${AUDIT_PAGE_MAX}).`, schema: Type.Integer({ minimum: 1, maximum: AUDIT_PAGE_MAX }) },
        { name: 'cursor', description: 'The `next` of the previous page.', schema: Type.String() },
      ],
      ok: json(200, 'A page of entries.', R.AuditPage), errors: ['account_not_found', 'invalid_field'],
    },
    handler (request) {
      const account = accountParam(request, catalogs)
      const query = new URLSearchParams(request.query)
      const rawLimit = query.get('limit')
      const limit = rawLimit === null || rawLimit === '' ? 50 : Number(rawLimit)
      if (!Number.isInteger(limit) || limit < 1 || limit > AUDIT_PAGE_MAX) throw new ApiError('invalid_field', `limit must be a whole number from 1 to ${AUDIT_PAGE_MAX}.`, '/limit')
      const cursor = query.get('cursor')
      return { status: 200, body: audit.list(account, limit, cursor === '' ? null : cursor) }
    },
  }]
}
