// The admin API's reads over many people of an account (the panel's People and Audiences pages):
// search by id prefix or attribute value, the recently active visitors, and the preview of an unsaved
// segment. Each walks stored rows, bounded (src/jobs/people-scan.ts): the answer says how many rows it
// examined (`scanned`) and whether those were all of the account's (`complete`).
//
// Cluster mode: a node holds only its own partitions' rows, so these reads are refused there
// (501 cluster_unsupported) rather than answered from a part of the people: `people` is null.

import Type, { type TSchema } from 'typebox'
import { ApiError } from '../errors.js'
import type { Catalogs } from '../catalog/catalogs.js'
import { validateSegment, type SegmentDef } from '../segments/rules.js'
import { NAME_PATTERN } from '../patterns.js'
import {
  PEOPLE_LIMIT_MAX, PEOPLE_SCAN_DEFAULT, PEOPLE_SCAN_MAX, PREVIEW_SAMPLE_MAX, parseRecentCursor,
  type PeopleScan, type PersonKind, type PersonSummary,
} from '../jobs/people-scan.js'
import type { Request, Reply } from './server.js'
import { json, type QueryParameter, type RouteDefinition } from './route.js'
import { SegmentPut } from './reply-schemas.js'
import { wholeNumber } from './admin-routes.js'

export interface PeopleDeps {
  catalogs: Catalogs
  /** Null in cluster mode: every route answers 501 cluster_unsupported. */
  people: PeopleScan | null
}

const LIMIT_DEFAULT = 20
const CURSOR_LENGTH_MAX = 1000
const NAME = new RegExp(NAME_PATTERN)

const Person = Type.Object({
  kind: Type.Union([Type.Literal('visitor'), Type.Literal('profile')]),
  id: Type.String(),
  attributes: Type.Object({}, { additionalProperties: true }),
  profileId: Type.Union([Type.String(), Type.Null()], { description: 'Visitors: the linked profile.' }),
  lastActive: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'Visitors: the last event or write (null: unknown; always null for profiles).' }),
  visitors: Type.Integer({ description: 'Profiles: linked devices (0 for visitors).' }),
})
const scannedFields = {
  scanned: Type.Integer({ description: 'Rows examined by this request.' }),
  complete: Type.Boolean({ description: 'True when those were every row of the account (of the id prefix): nothing was left unexamined.' }),
  next: Type.Union([Type.String(), Type.Null()], { description: 'Pass as ?cursor= to continue; null when complete (search, preview) or when the page was not full (recent).' }),
}
const PeoplePage = Type.Object({ people: Type.Array(Person), ...scannedFields })
const PreviewReply = Type.Object({
  matches: Type.Integer({ description: 'Visitors among those examined that match the rule now.' }),
  sample: Type.Array(Person, { description: `The first ${PREVIEW_SAMPLE_MAX} of them, in id order.` }),
  ...scannedFields,
  windowsRecorded: Type.Boolean({ description: 'False when the rule counts or sums events over a window that no saved segment of the account reads: visitors have no counters for it yet (they start when such a segment is saved), so those leaves read 0.' }),
})

const str = (max: number): TSchema => Type.String({ maxLength: max }) as TSchema
const SCAN: QueryParameter = { name: 'scan', description: `The most rows to examine (default ${PEOPLE_SCAN_DEFAULT}, at most ${PEOPLE_SCAN_MAX}).`, schema: Type.Integer({ minimum: 1, maximum: PEOPLE_SCAN_MAX }) as TSchema }
const CURSOR: QueryParameter = { name: 'cursor', description: 'The `next` of the previous answer (omitted: from the start).', schema: str(CURSOR_LENGTH_MAX) }
const LIMIT: QueryParameter = { name: 'limit', description: `People per page (default ${LIMIT_DEFAULT}, at most ${PEOPLE_LIMIT_MAX}).`, schema: Type.Integer({ minimum: 1, maximum: PEOPLE_LIMIT_MAX }) as TSchema }

function view (person: PersonSummary): Record<string, unknown> {
  return {
    kind: person.kind,
    id: person.id,
    attributes: person.attributes,
    profileId: person.profileId,
    lastActive: person.activeMs > 0 ? new Date(person.activeMs).toISOString() : null,
    visitors: person.visitors,
  }
}

export function peopleRoutes ({ catalogs, people }: PeopleDeps): RouteDefinition[] {
  const ok = (body: unknown): Reply => ({ status: 200, body })
  /** The account (404 when unknown), its query, and the scanner (501 in cluster mode). */
  const start = (request: Request): { account: string, query: URLSearchParams, scan: PeopleScan, scanMax: number, cursor: string | null } => {
    const account = (request.params[0] ?? '').toLowerCase()
    catalogs.accounts.get(account)
    if (people === null) throw new ApiError('cluster_unsupported', 'People search, the recently active and segment previews walk the stored visitors: in cluster mode each node holds only its own partitions, so they are served in embedded mode only (docs/panel.md).')
    const query = new URLSearchParams(request.query)
    const cursor = query.get('cursor')
    if (cursor !== null && cursor.length > CURSOR_LENGTH_MAX) throw new ApiError('invalid_field', `cursor must be the next of a previous answer (at most ${CURSOR_LENGTH_MAX} characters).`, '/cursor')
    return { account, query, scan: people, scanMax: wholeNumber(query.get('scan'), 1, PEOPLE_SCAN_MAX, 'scan', PEOPLE_SCAN_DEFAULT), cursor: cursor === '' ? null : cursor }
  }
  const errors = ['invalid_field', 'account_not_found', 'cluster_unsupported'] as const

  return [
    {
      method: 'get', pattern: '/admin/accounts/:account/people', body: false, role: 'viewer',
      doc: {
        summary: 'Search people', tag: 'People',
        description: 'Visitors (or profiles, `kind=profile`) whose id starts with `id`, and that have the attribute `attribute` (with `value`: equal to it, case-insensitive; for a list, one element equal to it), in id order. Not indexed: the account\'s rows are examined in id order, at most `scan` of them; `complete` says whether that was all of them, `next` continues.',
        query: [
          { name: 'kind', description: '`visitor` (default) or `profile`.', schema: Type.Union([Type.Literal('visitor'), Type.Literal('profile')]) as TSchema },
          { name: 'id', description: 'An id prefix (visitor ids are lower case).', schema: str(256) },
          { name: 'attribute', description: 'An attribute name the person must have.', schema: Type.String({ pattern: NAME_PATTERN }) as TSchema },
          { name: 'value', description: 'The value it must have (needs `attribute`).', schema: str(1000) },
          CURSOR, LIMIT, SCAN,
        ],
        ok: json(200, 'The people found and how far the search went.', PeoplePage), errors: [...errors],
      },
      async handler (request) {
        const { account, query, scan, scanMax, cursor } = start(request)
        const kind = (query.get('kind') ?? 'visitor') as PersonKind
        if (kind !== 'visitor' && kind !== 'profile') throw new ApiError('invalid_field', 'kind must be visitor or profile.', '/kind')
        const rawId = query.get('id') ?? ''
        if (rawId.length > 256) throw new ApiError('invalid_field', 'id must be at most 256 characters.', '/id')
        const idPrefix = kind === 'visitor' ? rawId.toLowerCase() : rawId
        const attribute = query.get('attribute') ?? ''
        const value = query.get('value')
        if (attribute !== '' && !NAME.test(attribute)) throw new ApiError('invalid_field', 'attribute must be an attribute name (1 to 128 characters of A-Z a-z 0-9 _ . : -).', '/attribute')
        if (value !== null && value.length > 1000) throw new ApiError('invalid_field', 'value must be at most 1000 characters.', '/value')
        if (value !== null && attribute === '') throw new ApiError('invalid_field', 'value needs attribute: the attribute whose value is searched.', '/value')
        const limit = wholeNumber(query.get('limit'), 1, PEOPLE_LIMIT_MAX, 'limit', LIMIT_DEFAULT)
        if (cursor !== null && !cursor.startsWith(idPrefix)) throw new ApiError('invalid_field', 'cursor must be the next of a previous answer to the same search.', '/cursor')
        const page = await scan.search(account, kind, { idPrefix, attribute: attribute === '' ? null : attribute, value }, cursor, limit, scanMax)
        return ok({ ...page, people: page.people.map(view) })
      },
    },
    {
      method: 'get', pattern: '/admin/accounts/:account/people/recent', body: false, role: 'viewer',
      doc: {
        summary: 'Recently active visitors', tag: 'People',
        description: 'Visitors by their last activity (an event, or a write of their attributes or segments), latest first. Not indexed: the most recent among the first `scan` rows of the account (all of them when `complete`); `next` lists those after the last one shown.',
        query: [CURSOR, LIMIT, SCAN],
        ok: json(200, 'The visitors and how far the scan went.', PeoplePage), errors: [...errors],
      },
      async handler (request) {
        const { account, query, scan, scanMax, cursor } = start(request)
        const after = cursor === null ? null : parseRecentCursor(cursor)
        if (cursor !== null && after === null) throw new ApiError('invalid_field', 'cursor must be the next of a previous answer.', '/cursor')
        const limit = wholeNumber(query.get('limit'), 1, PEOPLE_LIMIT_MAX, 'limit', LIMIT_DEFAULT)
        const page = await scan.recent(account, after, limit, scanMax)
        return ok({ ...page, people: page.people.map(view) })
      },
    },
    {
      method: 'post', pattern: '/admin/accounts/:account/segments-preview', body: true, role: 'editor', audit: false,
      doc: {
        summary: 'Preview who an unsaved segment matches', tag: 'Segments',
        description: 'A segment definition as `PUT /admin/accounts/{account}/segments/{name}` takes it (validated the same way; a rule is required) evaluated now against the stored visitors: their attributes, segments, behaviour and window counters, as the segment engine reads them. Nothing is saved. Not indexed: at most `scan` visitors are examined (`complete` says whether that was all of them; `next` continues, counting the rest).',
        query: [CURSOR, SCAN],
        body: { schema: SegmentPut, example: { rule: { fact: 'attribute.plan', op: 'eq', value: 'pro' } } },
        ok: json(200, 'How many match and who.', PreviewReply), errors: [...errors, 'invalid_segment'],
      },
      async handler (request) {
        const { account, scan, scanMax, cursor } = start(request)
        const problems = validateSegment(request.body)
        if (problems.length > 0) throw ApiError.of(problems, 'The segment definition is invalid.')
        const def = request.body as SegmentDef
        if (def.rule === undefined) throw new ApiError('invalid_segment', 'A preview needs a rule: a segment without one is manual (its members are assigned through the public API).', '/rule')
        const preview = await scan.preview(account, def.rule, cursor, scanMax)
        return ok({ ...preview, sample: preview.sample.map(view) })
      },
    },
  ]
}
