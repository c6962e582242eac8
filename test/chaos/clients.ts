// The chaos run's clients: concurrent workers sending operations through random running nodes of the
// cluster, each recorded in the history as invoked, then ok / fail / info (test/chaos/history.ts):
// - attribute writes with unique values (a counter shared by all): `v` on visitors, `p` on profiles;
// - purchases with unique order ids and an `Idempotency-Key` header; a purchase whose outcome is unknown
//   is sent again (same body, same key) up to PURCHASE_RETRIES times, as a careful client would;
// - identify calls (a page view with a signed `profileId`), each linking a visitor to a profile it was
//   never linked to before, so the visitor's link is a register of unique values too;
// - reads of visitors (the public query, or the admin view with the order ids and purchase count) and of
//   profiles.
// Writes to one visitor or profile are made one at a time (a key's writes are ordered by invocation);
// reads of it go on meanwhile. A node is chosen at random among the running ones for each request, a
// paused one included (its requests hang until the client's timeout: unknown).
//
// How an answer is classified: 200 is ok; a 4xx, or a 503 the API documents as a refusal made before
// anything is done (`overloaded`, `shutting_down`: docs/api.md, "Checks run in this order"), or a
// connection refused, is a definite failure; anything else (other 503s, which say only that nothing was
// acknowledged, a 500, a timeout, a connection cut) is unknown.

import { createHmac } from 'node:crypto'
import type { Tenant } from '../helpers/beacon.js'
import { ADMIN_KEY } from '../helpers/beacon.js'
import type { History, Observed } from './history.js'
import type { Rng } from './rng.js'

/** A node a request can be sent to: its id and its URL, null while it is not running. */
export interface Node {
  id: string
  url: string | null
}

export interface ClientsOptions {
  history: History
  tenant: Tenant
  rng: Rng
  nodes: () => Node[]
  concurrency: number
  visitors: number
  profiles: number
  /** A request not answered within this long is abandoned (unknown). */
  timeoutMs: number
  /** Prefix of order ids and idempotency keys (the seed: runs never share one). */
  tag: string
}

interface Entity {
  kind: 'visitor' | 'profile'
  id: string
  busy: boolean
  /** Visitors: the profiles it was ever asked to link to; the next identify picks another. */
  linked: Set<string>
  orders: number
}

/** What classify() makes of an answer. */
interface Outcome {
  type: 'ok' | 'fail' | 'info'
  status?: number
  code?: string
  error?: string
  body?: any
}

const PURCHASE_RETRIES = 3
/** Order ids per visitor stay below the 256 a visitor remembers (actors/visitor.ts ORDER_IDS_MAX). */
const ORDERS_PER_VISITOR_MAX = 200
const REFUSED_503 = new Set(['overloaded', 'shutting_down'])

export class Clients {
  private readonly options: ClientsOptions
  readonly visitors: Entity[]
  readonly profiles: Entity[]
  private value = 0
  private orderSeq = 0
  private running = false
  private workers: Array<Promise<void>> = []

  constructor (options: ClientsOptions) {
    this.options = options
    const { rng } = options
    this.visitors = Array.from({ length: options.visitors }, () => ({ kind: 'visitor' as const, id: rng.uuid(), busy: false, linked: new Set<string>(), orders: 0 }))
    this.profiles = Array.from({ length: options.profiles }, (_, i) => ({ kind: 'profile' as const, id: `chaos-${options.tag}-${i}@example.com`, busy: false, linked: new Set<string>(), orders: 0 }))
  }

  start (deadlineMs: number): void {
    this.running = true
    this.workers = Array.from({ length: this.options.concurrency }, async () => {
      const rng = this.options.rng.fork()
      while (this.running && Date.now() < deadlineMs) await this.step(rng)
    })
  }

  /** Stops the workers once their operations in flight are answered or abandoned. */
  async stop (): Promise<void> {
    this.running = false
    await Promise.all(this.workers)
  }

  private async step (rng: Rng): Promise<void> {
    const roll = rng.next()
    if (roll < 0.35) {
      const entity = rng.next() < 0.7 ? this.free(rng, this.visitors) : this.free(rng, this.profiles)
      if (entity !== null) await this.locked(entity, () => this.writeAttribute(rng, entity))
    } else if (roll < 0.55) {
      const visitor = this.free(rng, this.visitors)
      if (visitor !== null && visitor.orders < ORDERS_PER_VISITOR_MAX) await this.locked(visitor, () => this.purchase(rng, visitor))
    } else if (roll < 0.65) {
      const visitor = this.free(rng, this.visitors)
      if (visitor !== null) await this.locked(visitor, () => this.identify(rng, visitor))
    } else {
      const which = rng.next()
      if (which < 0.4) await this.readVisitor(rng, rng.pick(this.visitors), 'query')
      else if (which < 0.7) await this.readVisitor(rng, rng.pick(this.visitors), 'admin')
      else await this.readProfile(rng, rng.pick(this.profiles))
    }
  }

  /** A visitor or profile with no write in flight (null: none found in a few tries; the worker waits a moment). */
  private free (rng: Rng, entities: Entity[]): Entity | null {
    for (let tries = 0; tries < 8; tries++) {
      const entity = rng.pick(entities)
      if (!entity.busy) return entity
    }
    return null
  }

  private async locked (entity: Entity, run: () => Promise<void>): Promise<void> {
    entity.busy = true
    try {
      await run()
    } finally {
      entity.busy = false
    }
  }

  private async writeAttribute (rng: Rng, entity: Entity): Promise<void> {
    const { account, token } = this.options.tenant
    const value = ++this.value
    const [key, path, body] = entity.kind === 'visitor'
      ? [`v:${entity.id}`, '/visitors/attributes', { account, token, visitorId: entity.id, attributes: { v: value } }]
      : [`p:${entity.id}`, '/profiles/attributes', { account, token, profileId: entity.id, attributes: { p: value } }]
    await this.operation(rng, { f: 'write', key, value }, (url) => this.send(url, 'POST', path, body))
  }

  private async purchase (rng: Rng, visitor: Entity): Promise<void> {
    const { account } = this.options.tenant
    visitor.orders++
    const orderId = `o-${this.options.tag}-${++this.orderSeq}`
    const idempotencyKey = `chaos-${orderId}`
    const body = { account, visitorId: visitor.id, platform: 'web', event: 'purchase', orderId, orderTotal: 1 }
    for (let attempt = 1; attempt <= 1 + PURCHASE_RETRIES; attempt++) {
      const outcome = await this.operation(rng, { f: 'add', key: `orders:${visitor.id}`, value: orderId, idempotencyKey, attempt },
        (url) => this.send(url, 'POST', '/campaigns/query', body, { 'idempotency-key': idempotencyKey }))
      // A definite answer ends it; an unknown one is sent again, as its caller would.
      if (outcome.type !== 'info' || !this.running) return
      await sleep(500)
    }
  }

  private async identify (rng: Rng, visitor: Entity): Promise<void> {
    const candidates = this.profiles.filter(profile => !visitor.linked.has(profile.id))
    if (candidates.length === 0) return
    const profile = rng.pick(candidates)
    visitor.linked.add(profile.id)
    const { account, identitySecret } = this.options.tenant
    const body = {
      account, visitorId: visitor.id, platform: 'web', event: 'pageView', path: '/chaos',
      profileId: profile.id, profileIdSignature: createHmac('sha256', identitySecret).update(profile.id).digest('hex'),
    }
    await this.operation(rng, { f: 'write', key: `link:${visitor.id}`, value: profile.id }, (url) => this.send(url, 'POST', '/campaigns/query', body))
  }

  private async readVisitor (rng: Rng, visitor: Entity, how: 'query' | 'admin'): Promise<void> {
    await this.operation(rng, { f: 'read', key: `visitor:${visitor.id}` }, (url) => this.visitorRead(url, visitor.id, how))
  }

  private async readProfile (rng: Rng, profile: Entity): Promise<void> {
    await this.operation(rng, { f: 'read', key: `profile:${profile.id}` }, (url) => this.profileRead(url, profile.id))
  }

  /** A visitor read through `url`: its `v` and link (the public query), and its orders (the admin view). */
  async visitorRead (url: string, visitorId: string, how: 'query' | 'admin'): Promise<Outcome & { read?: Observed }> {
    const { account, token } = this.options.tenant
    if (how === 'query') {
      const outcome = await this.send(url, 'POST', '/visitors/query', { account, token, visitorId, attributes: ['v'] })
      if (outcome.type !== 'ok') return outcome
      return { ...outcome, read: { registers: { [`v:${visitorId}`]: outcome.body.attributes?.v?.[0]?.value ?? null, [`link:${visitorId}`]: outcome.body.profileId ?? null }, sets: {} } }
    }
    const outcome = await this.send(url, 'GET', `/admin/accounts/${account}/visitors/${visitorId}`, undefined, { authorization: `Bearer ${ADMIN_KEY}` })
    if (outcome.type !== 'ok') return outcome
    const view = outcome.body
    return {
      ...outcome,
      read: {
        registers: { [`v:${visitorId}`]: view.attributes?.v ?? null, [`link:${visitorId}`]: view.profileId ?? null },
        sets: { [`orders:${visitorId}`]: { members: view.orderIds ?? [], count: view.purchases ?? 0 } },
      },
    }
  }

  async profileRead (url: string, profileId: string): Promise<Outcome & { read?: Observed }> {
    const { account, token } = this.options.tenant
    const outcome = await this.send(url, 'POST', '/profiles/query', { account, token, profileId, attributes: ['p'] })
    if (outcome.type !== 'ok') return outcome
    return { ...outcome, read: { registers: { [`p:${profileId}`]: outcome.body.attributes?.p?.[0]?.value ?? null }, sets: {} } }
  }

  /** One operation through a random running node, recorded as invoked and completed. */
  private async operation (rng: Rng, what: { f: 'write' | 'add' | 'read', key: string, value?: string | number, idempotencyKey?: string, attempt?: number },
    request: (url: string) => Promise<Outcome & { read?: Observed }>): Promise<Outcome> {
    const running = this.options.nodes().filter((node): node is Node & { url: string } => node.url !== null)
    if (running.length === 0) {
      await sleep(100)
      return { type: 'fail', error: 'no node running' }
    }
    const node = rng.pick(running)
    const { history } = this.options
    const op = history.invoke({ ...what, node: node.id })
    const outcome = await request(node.url)
    const { body: _body, ...recorded } = outcome
    history.add({ op, time: history.now(), ...recorded })
    return outcome
  }

  private async send (url: string, method: string, path: string, body: unknown, headers: Record<string, string> = {}): Promise<Outcome> {
    let res: Response
    let text: string
    try {
      res = await fetch(url + path, {
        method,
        headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.options.timeoutMs),
      })
      text = await res.text()
    } catch (error) {
      const cause = (error as { cause?: { code?: string } }).cause
      const reason = cause?.code ?? (error as Error).name
      // Refused at connect: the request never left (the node's port is closed: it is down).
      return { type: reason === 'ECONNREFUSED' ? 'fail' : 'info', error: reason }
    }
    let parsed: any = null
    try {
      parsed = JSON.parse(text)
    } catch {}
    const code = parsed?.errors?.[0]?.code as string | undefined
    if (res.status === 200) return { type: 'ok', status: 200, body: parsed }
    const definite = (res.status >= 400 && res.status < 500) || (res.status === 503 && code !== undefined && REFUSED_503.has(code))
    return { type: definite ? 'fail' : 'info', status: res.status, ...(code === undefined ? { error: text.slice(0, 200) } : { code }) }
  }
}

export function sleep (ms: number): Promise<void> {
  return new Promise(resolve => setTimeout(resolve, ms))
}
