// The audit log of an account, newest first, paged by cursor (owners and the admin key).

import { ApiError } from '../errors.js'
import { AUDIT_PAGE_MAX, type AuditLog } from '../audit/audit-log.js'
import type { Registry } from '../store/registry.js'
import { accountParam } from './access.js'
import type { Route } from './server.js'

export function auditRoutes ({ registry, audit }: { registry: Registry, audit: AuditLog }): Route[] {
  return [{
    method: 'get', pattern: '/admin/accounts/:account/audit', body: false, role: 'owner',
    handler (request) {
      const account = accountParam(request, registry)
      const query = new URLSearchParams(request.query)
      const rawLimit = query.get('limit')
      const limit = rawLimit === null || rawLimit === '' ? 50 : Number(rawLimit)
      if (!Number.isInteger(limit) || limit < 1 || limit > AUDIT_PAGE_MAX) throw new ApiError('invalid_field', `limit must be a whole number from 1 to ${AUDIT_PAGE_MAX}.`, '/limit')
      const cursor = query.get('cursor')
      return { status: 200, body: audit.list(account, limit, cursor === '' ? null : cursor) }
    },
  }]
}
