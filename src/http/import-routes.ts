// Bulk imports over the admin API (docs/events.md, "Bulk import"): POST an NDJSON body, read as it
// arrives and written to disk (never held whole, up to BEACON_IMPORT_MAX_BYTES), answered 202 with the
// job once the body is durable; then the job's progress and the account's jobs. The owner role or the
// admin key. Cluster mode: the import runs on the node that took the upload, read through any node
// (src/jobs/cluster-imports.ts).

import Type from 'typebox'
import { ApiError } from '../errors.js'
import type { Catalogs } from '../catalog/catalogs.js'
import type { ImportJob, ImportService } from '../jobs/import-jobs.js'
import { IMPORT_REFUSALS_KEPT } from '../jobs/import-jobs.js'
import { accountParam } from './access.js'
import { NODE_JOB_ID } from '../cluster/node-jobs.js'
import type { BodyStream } from './body-stream.js'
import { json, type RouteDefinition } from './route.js'

export interface ImportRoutesDeps {
  catalogs: Catalogs
  /** This node's imports, or the cluster's. */
  imports: ImportService
  /** BEACON_IMPORT_MAX_BYTES. */
  maxBytes: number
}

const ImportView = Type.Object({
  id: Type.String(),
  account: Type.String(),
  state: Type.Union([Type.Literal('queued'), Type.Literal('running'), Type.Literal('done'), Type.Literal('failed')]),
  deliver: Type.Boolean({ description: 'Webhooks, destinations and audience changes fire for the imported rows.' }),
  createdAt: Type.String({ format: 'date-time' }),
  finishedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  bytes: Type.Integer({ description: 'The size of the uploaded file.' }),
  rowsRead: Type.Integer({ description: 'Lines read and committed.' }),
  applied: Type.Integer(),
  duplicates: Type.Integer({ description: 'Rows imported before (same messageId, or same row without one, within 24 hours): counted once.' }),
  refused: Type.Integer(),
  refusals: Type.Array(Type.Object({ line: Type.Integer(), code: Type.String(), message: Type.String(), field: Type.Optional(Type.String()) }), { description: `The first ${IMPORT_REFUSALS_KEPT} refused lines, with why.` }),
  error: Type.Union([Type.String(), Type.Null()], { description: 'Why a failed import stopped.' }),
})

export function importRoutes ({ catalogs, imports, maxBytes }: ImportRoutesDeps): RouteDefinition[] {
  return [{
    method: 'post', pattern: '/admin/accounts/:account/imports', body: 'stream', streamMaxBytes: maxBytes, role: 'owner',
    doc: {
      summary: 'Start a bulk import',
      description: 'The body is NDJSON: one JSON object a line, `type` profile, visitor, link or event (docs/events.md, "Bulk import"). ' +
        `It is read as it arrives and kept on disk while the import runs, up to BEACON_IMPORT_MAX_BYTES (${maxBytes} bytes here). ` +
        'Answered 202 with the job once the body is stored; follow it at GET …/imports/{id}. `?deliver=true`: the imported rows fire webhooks, destinations and audience changes (by default none). ' +
        'In cluster mode the import runs on the node that took it, and is read through any node.',
      tag: 'Event log',
      query: [{ name: 'deliver', description: 'true: webhooks and destinations are told of the imported rows (default false).', schema: Type.Boolean() }],
      body: { schema: Type.String({ contentMediaType: 'application/x-ndjson', description: 'One row a line.' }), example: {}, raw: 'application/x-ndjson' },
      ok: json(202, 'The import, queued.', ImportView), errors: ['account_not_found', 'invalid_field', 'body_incomplete'],
    },
    async handler (request) {
      const account = accountParam(request, catalogs)
      const deliver = new URLSearchParams(request.query).get('deliver')
      if (deliver !== null && deliver !== 'true' && deliver !== 'false') throw new ApiError('invalid_field', 'deliver must be true or false.', '/deliver')
      const job = await imports.create(account, request.body as BodyStream, deliver === 'true')
      return { status: 202, body: view(job) }
    },
  }, {
    method: 'get', pattern: '/admin/accounts/:account/imports', body: false, role: 'owner',
    doc: {
      summary: 'The account\'s imports, newest first', tag: 'Event log',
      ok: json(200, 'The imports.', Type.Object({ imports: Type.Array(ImportView) })), errors: ['account_not_found', 'unavailable'],
    },
    async handler (request) {
      const account = accountParam(request, catalogs)
      return { status: 200, body: { imports: (await imports.list(account)).map(view) } }
    },
  }, {
    method: 'get', pattern: '/admin/accounts/:account/imports/:id', body: false, role: 'owner',
    doc: {
      summary: 'An import\'s progress', description: 'Rows read, applied, duplicates, refused (the first 100 with their line numbers and reasons), and its state.', tag: 'Event log',
      ok: json(200, 'The import.', ImportView), errors: ['account_not_found', 'import_not_found', 'unavailable'],
    },
    async handler (request) {
      const account = accountParam(request, catalogs)
      const id = request.params[1] ?? ''
      const job = NODE_JOB_ID.test(id) ? await imports.get(account, id) : null
      if (job === null) throw new ApiError('import_not_found')
      return { status: 200, body: view(job) }
    },
  }]
}

/** The job without its resume point. */
function view (job: ImportJob): Omit<ImportJob, 'offset'> {
  const { offset: _offset, ...shown } = job
  return shown
}
