import { expect } from 'chai'
import { readFileSync } from 'node:fs'
import { Compile } from 'typebox/schema'
import { admin, ADMIN_KEY, createTenant, discardBeacon, startBeacon, type BeaconProcess, type Tenant } from '../helpers/beacon.js'
import { EXAMPLE_ACCOUNT, EXAMPLE_EMAIL, EXAMPLE_PASSWORD, EXAMPLE_TOKEN, type RouteDefinition } from '../../src/http/route.js'
import { operationKey } from '../../src/ops/openapi.js'
import { AccountDeletion } from '../../src/http/reply-schemas.js'
import { DELETION_PHASES } from '../../src/jobs/account-deletion.js'
import { startInProcess } from '../helpers/in-process.js'
import { addUser, signIn } from '../helpers/panel.js'

type Doc = {
  openapi: string
  info: { title: string, version: string }
  paths: Record<string, Record<string, OperationObject>>
  components: { schemas: Record<string, unknown>, securitySchemes: Record<string, unknown> }
}
type OperationObject = {
  operationId: string
  parameters?: { name: string, in: string, required?: boolean }[]
  requestBody?: { content: Record<string, { schema: object, example?: unknown }> }
  responses: Record<string, { description: string, content?: Record<string, { schema: object }> }>
  security: unknown[]
}

const METHODS = ['get', 'post', 'put', 'patch', 'delete', 'options'] as const
/** The admin webhook routes may land after this document; until then they are tolerated (with a note). */
const PENDING = /\/webhooks/

/** Path parameters filled with records the setup creates. */
function fill (path: string, tenant: Tenant, tokenId: string): string {
  return path
    .replace(/\/users\/\{id\}/, `/users/${memberId}`)
    .replace(/\/media\/\{id\}/, `/media/${mediaId}`)
    .replace(/\/imports\/\{id\}/, `/imports/${importId}`)
    .replace(/^\/media\/\{account\}\/\{id\}/, `/media/${tenant.account}/${mediaId}`)
    .replace('{account}', tenant.account)
    .replace(/\/tokens\/\{id\}/, `/tokens/${tokenId}`)
    .replace(/\/event-types\/\{name\}/, '/event-types/signup')
    .replace(/\/campaigns\/\{id\}/, '/campaigns/summer')
    .replace(/\/segments\/\{name\}/, '/segments/browsers')
    .replace(/\/webhooks\/\{id\}/, '/webhooks/crm')
    .replace(/\/destinations\/\{id\}/, '/destinations/meta')
    .replace(/\/replays\/\{id\}/, `/replays/${replayId}`)
    .replace(/\/saved-reports\/\{id\}/, `/saved-reports/${savedReportId}`)
    .replace('{visitorId}', '2b7e1b8e-7c0e-4c7e-9a4e-1b2c3d4e5f60')
    .replace('{profileId}', encodeURIComponent('ana@example.com'))
}

/** An example body with the placeholder account and token replaced by real ones. */
function bodyOf (example: unknown, tenant: Tenant): unknown {
  return JSON.parse(JSON.stringify(example).replaceAll(EXAMPLE_ACCOUNT, tenant.account).replaceAll(EXAMPLE_TOKEN, tenant.token))
}

interface Answer { status: number, contentType: string, text: string, allow: string | null }

/** A panel session (its routes need one) and a user other than the owner to change and remove. */
let sessionCookie = ''
let memberId = ''
let mediaId = ''
/** The replay the documented POST …/replays started (its progress and cancel are read after it). */
let replayId = '00000000-0000-4000-8000-000000000000'
let savedReportId = ''
let importId = ''
/** The smallest PNG signature and header: what a raw (image) body operation is sent. */
const PNG = Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010806000000', 'hex')

async function call (base: string, method: string, path: string, body: unknown, init: { key?: string | null, raw?: string | Buffer } = {}): Promise<Answer> {
  const headers: Record<string, string> = {}
  if (init.key !== null) {
    headers.authorization = `Bearer ${init.key ?? ADMIN_KEY}`
    headers.cookie = sessionCookie
    // The panel's same-origin check (CSRF) on admin changes; public calls come from no browser here.
    if (path.startsWith('/admin')) headers.origin = base
  }
  if (body !== undefined || init.raw !== undefined) headers['content-type'] = 'application/json'
  const res = await fetch(base + path, { method, headers, body: init.raw ?? (body === undefined ? undefined : JSON.stringify(body)) })
  return { status: res.status, contentType: res.headers.get('content-type') ?? '', text: await res.text(), allow: res.headers.get('allow') }
}

describe('OpenAPI document (GET /openapi.json)', () => {
  let beacon: BeaconProcess
  let doc: Doc
  let tenant: Tenant
  let previous: string | null = null
  let tokenId: string

  before(async () => {
    beacon = await startBeacon()
    const res = await fetch(beacon.url + '/openapi.json')
    expect(res.status).to.equal(200)
    expect(res.headers.get('content-type')).to.equal('application/json')
    doc = await res.json() as Doc
  })

  // A fresh tenant for each test: one of them deletes its account.
  beforeEach(async () => {
    // The previous test's account goes, with its users: their emails (the documented examples) are free again.
    if (previous !== null) await admin(beacon.url, 'DELETE', `/admin/accounts/${previous}`)
    tenant = await createTenant(beacon.url)
    previous = tenant.account
    const tokens = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/tokens`)
    tokenId = tokens.body.tokens[0].id
    await addUser(beacon.url, tenant.account, EXAMPLE_EMAIL, 'owner', EXAMPLE_PASSWORD)
    memberId = (await addUser(beacon.url, tenant.account, 'member@example.com', 'editor')).id
    sessionCookie = (await signIn(beacon.url, EXAMPLE_EMAIL, EXAMPLE_PASSWORD)).signedIn!.cookie
    mediaId = JSON.parse((await call(beacon.url, 'POST', `/admin/accounts/${tenant.account}/media`, undefined, { raw: PNG })).text).id
    savedReportId = JSON.parse((await call(beacon.url, 'POST', `/admin/accounts/${tenant.account}/saved-reports`, { name: 'Visitors', metric: { type: 'uniqueVisitors' }, range: { lastDays: 7 }, granularity: 'day' })).text).id
    importId = JSON.parse((await call(beacon.url, 'POST', `/admin/accounts/${tenant.account}/imports`, undefined, { raw: '{"type":"link"}\n' })).text).id
  })

  after(() => discardBeacon(beacon))

  /** Check an answer against the documented response of its status; returns the failure, or null. */
  function mismatch (operation: OperationObject, answer: Answer): string | null {
    const response = operation.responses[String(answer.status)]
    if (response === undefined) return `status ${answer.status} is not documented (${answer.text.slice(0, 200)})`
    const [type, media] = Object.entries(response.content ?? {})[0] ?? []
    if (type === undefined || media === undefined) return null
    if (!answer.contentType.startsWith(type.split(';')[0]!)) return `content type ${answer.contentType}, documented ${type}`
    const value = type.startsWith('application/json') ? JSON.parse(answer.text) as unknown : answer.text
    const check = Compile({ ...media.schema, components: doc.components } as never)
    return check.Check(value) ? null : `${answer.status} body does not match its schema: ${answer.text.slice(0, 300)}`
  }

  it('is an OpenAPI 3.1 document: info, unique operation ids, declared path parameters, a response per operation, resolvable refs', () => {
    expect(doc.openapi).to.match(/^3\.1\.\d+$/)
    expect(doc.info.title).to.equal('Beacon')
    expect(doc.info.version).to.match(/^\d+\.\d+\.\d+/)
    const ids = new Set<string>()
    for (const [path, item] of Object.entries(doc.paths)) {
      expect(path).to.match(/^\//)
      for (const [method, operation] of Object.entries(item)) {
        expect(METHODS as readonly string[], `${method} ${path}`).to.include(method)
        expect(ids.has(operation.operationId), operation.operationId).to.equal(false)
        ids.add(operation.operationId)
        const templated = [...path.matchAll(/\{([^}]+)\}/g)].map(m => m[1])
        const declared = (operation.parameters ?? []).filter(p => p.in === 'path')
        expect(declared.map(p => p.name), `${method} ${path}`).to.deep.equal(templated)
        expect(declared.every(p => p.required === true)).to.equal(true)
        expect(Object.keys(operation.responses).length, `${method} ${path}`).to.be.greaterThan(0)
        for (const [status, response] of Object.entries(operation.responses)) {
          expect(status).to.match(/^[1-5]\d\d$/)
          expect(response.description, `${method} ${path} ${status}`).to.be.a('string').and.not.equal('')
        }
        for (const scheme of operation.security.flatMap(s => Object.keys(s as object))) expect(doc.components.securitySchemes).to.have.property(scheme)
      }
    }
    const text = JSON.stringify(doc)
    for (const [, pointer] of text.matchAll(/"\$ref":"([^"]+)"/g)) {
      const target = pointer!.replace(/^#\//, '').split('/').reduce<unknown>((at, key) => (at as Record<string, unknown> | undefined)?.[key], doc)
      expect(target, pointer).to.not.equal(undefined)
    }
    // Every schema in the document is one a validator accepts.
    for (const item of Object.values(doc.paths)) {
      for (const operation of Object.values(item)) {
        for (const media of Object.values(operation.requestBody?.content ?? {})) Compile({ ...media.schema, components: doc.components } as never)
        for (const response of Object.values(operation.responses)) {
          for (const media of Object.values(response.content ?? {})) Compile({ ...media.schema, components: doc.components } as never)
        }
      }
    }
  })

  it('is made from the routes the server is built with: every one but the panel\'s files, each with a summary, a tag and its answers', async () => {
    const node = await startInProcess()
    let routes: readonly RouteDefinition[]
    try {
      routes = node.beacon.routes
    } finally {
      await node.close()
    }
    const undocumented = routes.filter(route => route.doc === null).map(route => route.pattern)
    expect(undocumented, 'routes left out of the document').to.deep.equal(['/panel', '/panel/assets/*', '/panel/*'])
    const documented = routes.filter(route => route.doc !== null)
    for (const route of documented) {
      const key = operationKey(route.method, route.pattern)
      expect(route.doc!.summary, key).to.be.a('string').and.not.equal('')
      expect(route.doc!.ok.description, key).to.be.a('string').and.not.equal('')
      expect(route.doc!.errors, key).to.be.an('array')
      // A route that documents a body takes one, and the other way round.
      expect(route.doc!.body === undefined, `${key} body`).to.equal(route.body === false)
    }
    // The document served and the router are the same list, operation for operation.
    const served = Object.entries(doc.paths).flatMap(([path, item]) => Object.keys(item).map(method => `${method.toUpperCase()} ${path}`))
    expect(served.sort()).to.deep.equal(documented.map(route => operationKey(route.method, route.pattern)).sort())
    // Every operation lists the refusals every operation may answer, and an admin one its authentication.
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(item)) {
        expect(operation.responses, `${method} ${path}`).to.include.keys('500', '503')
        if (operation.security.length > 0) expect(operation.responses, `${method} ${path}`).to.include.keys('401', '403')
      }
    }
  })

  it('documents every method the running server accepts on each documented path (405 Allow)', async () => {
    for (const [path, item] of Object.entries(doc.paths)) {
      const probe = METHODS.find(m => item[m] === undefined)
      if (probe === undefined) continue
      const answer = await call(beacon.url, probe.toUpperCase(), fill(path, tenant, tokenId), probe === 'get' || probe === 'delete' ? undefined : {})
      if (answer.status === 404 && PENDING.test(path)) continue
      expect(answer.status, `${probe} ${path}`).to.equal(405)
      const allowed = (answer.allow ?? '').split(',').map(m => m.trim().toLowerCase()).filter(Boolean)
      for (const method of allowed) expect(item, `${method.toUpperCase()} ${path} is served but not documented`).to.have.property(method === 'del' ? 'delete' : method)
    }
  })

  it('answers every documented operation with its documented success status and body', async () => {
    const entries = Object.entries(doc.paths).flatMap(([path, item]) => Object.entries(item).map(([method, operation]) => ({ path, method, operation })))
    // Create before reading, read before deleting (the token is revoked last of all: public calls use it).
    // The account itself is deleted after everything else, and its deletion's progress read after that.
    const rank = (m: string, path: string): number => path.endsWith('/deletion') ? 4 : m === 'delete' && path === '/admin/accounts/{account}' ? 3 : m === 'delete' ? 2 : m === 'get' ? 1 : 0
    entries.sort((a, b) => rank(a.method, a.path) - rank(b.method, b.path) || Number(a.path.includes('/tokens/')) - Number(b.path.includes('/tokens/')))
    const failures: string[] = []
    for (const { path, method, operation } of entries) {
      const media = operation.requestBody?.content['application/json']
      const body = media === undefined ? undefined : bodyOf(media.example, tenant)
      if (media !== undefined) expect(Compile({ ...media.schema, components: doc.components } as never).Check(body), `${method} ${path} example`).to.equal(true)
      const raw = operation.requestBody !== undefined && media === undefined ? PNG : undefined
      const answer = await call(beacon.url, method.toUpperCase(), fill(path, tenant, tokenId), body, raw === undefined ? {} : { raw })
      if (method === 'post' && path.endsWith('/replays') && answer.status === 202) replayId = (JSON.parse(answer.text) as { id: string }).id
      if ((answer.status === 404 && answer.text.includes('"not_found"')) || answer.status === 405) {
        if (PENDING.test(path)) {
          console.log(`      note: ${method.toUpperCase()} ${path} is documented but not served yet (${answer.status})`)
          continue
        }
        failures.push(`${method.toUpperCase()} ${path}: not served (${answer.status})`)
        continue
      }
      const ok = Object.keys(operation.responses).find(status => status.startsWith('2'))
      if (String(answer.status) !== ok) failures.push(`${method.toUpperCase()} ${path}: ${answer.status}, documented success ${ok}: ${answer.text.slice(0, 300)}`)
      const wrong = mismatch(operation, answer)
      if (wrong !== null) failures.push(`${method.toUpperCase()} ${path}: ${wrong}`)
    }
    expect(failures).to.deep.equal([])
  })

  it('documents the refusals it answers: 401 without the admin key or the token, 400 for a body that is not JSON', async () => {
    const failures: string[] = []
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(item)) {
        const target = fill(path, tenant, tokenId)
        const probes: Answer[] = []
        if (operation.security.length > 0) probes.push(await call(beacon.url, method.toUpperCase(), target, undefined, { key: null }))
        if (operation.requestBody?.content['application/json'] !== undefined) probes.push(await call(beacon.url, method.toUpperCase(), target, undefined, { raw: '{"not json' }))
        const example = operation.requestBody?.content['application/json']?.example as Record<string, unknown> | undefined
        if (example !== undefined && 'token' in example) {
          const { token: _token, ...withoutToken } = bodyOf(example, tenant) as Record<string, unknown>
          probes.push(await call(beacon.url, method.toUpperCase(), target, withoutToken))
        }
        for (const answer of probes) {
          if (answer.status === 404 && PENDING.test(path)) continue
          expect([400, 401], `${method} ${path}`).to.include(answer.status)
          const wrong = mismatch(operation, answer)
          if (wrong !== null) failures.push(`${method.toUpperCase()} ${path}: ${wrong}`)
        }
      }
    }
    expect(failures).to.deep.equal([])
  })

  it('documents an account deletion seen in any of its phases (a slow one is read in its last ones too)', () => {
    const check = Compile(AccountDeletion as never)
    const removed = Object.fromEntries(DELETION_PHASES.map(phase => [phase, 0]))
    for (const phase of [...DELETION_PHASES, null]) {
      const view = { account: EXAMPLE_ACCOUNT, name: 'shop', state: phase === null ? 'done' : 'running', startedAt: '2026-11-28T11:48:44.060Z', finishedAt: null, phase, removed }
      expect(check.Check(view), `phase ${String(phase)}`).to.equal(true)
    }
  })

  it('has a curl example in docs/api.md for every documented operation', () => {
    const text = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8')
    const examples: { method: string, path: string }[] = []
    // A curl command may continue on the next lines (trailing backslash).
    for (const command of text.replace(/\\\n\s*/g, ' ').split('\n').filter(line => /^\s*curl /.test(line))) {
      const path = /(?:localhost|127\.0\.0\.1):8080(\/[^\s'"?]*)/.exec(command)?.[1]
      if (path === undefined) continue
      const method = /-X\s+([A-Z]+)/.exec(command)?.[1] ?? (/\s(-d|--data)\s/.test(command) ? 'POST' : 'GET')
      examples.push({ method, path })
    }
    const operations = Object.entries(doc.paths).flatMap(([path, item]) => Object.keys(item).map(method => [method.toUpperCase(), path] as const))
    const missing = operations.filter(([method, path]) => {
      const pattern = new RegExp('^' + path.replace(/[.]/g, '\\.').replace(/\{[^}]+\}/g, '[^/]+') + '$')
      return !examples.some(example => example.method === method && pattern.test(example.path))
    })
    expect(missing, 'operations without a curl example in docs/api.md').to.deep.equal([])
  })
})
