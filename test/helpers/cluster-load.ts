// Concurrent load through the nodes of a Beacon cluster (test/helpers/beacon-cluster.ts), with a ledger of
// what each write attempted and what was acknowledged, for fault tests: attribute writes to many visitors
// and profiles, and purchases with distinct order ids per visitor. Afterwards `verify` reads every key
// back through every node and lists what does not match the ledger. A read answered 503 with
// Retry-After (a partition changing hands) is read again after it, as a client would, up to
// VERIFY_TRIES times; such reads are counted (`verifyRetries`).
//
// Each key has at most one request of this load in flight at a time (its writes are sequential as the
// client sees them), so what a key must hold is known:
// - an attribute: the last acknowledged value, or a value attempted after it (a request answered 503 or
//   cut off may still have been applied: the ledger keeps those values too);
// - a visitor's purchase count: at least the order ids acknowledged, at most the distinct order ids
//   attempted. A purchase answered 503 is sent again with the same order id (a client retry), and now and
//   then an acknowledged order id is sent again (a replay): neither may count twice.
//
// Every answer is classified: 200, 503 with Retry-After (allowed during faults, counted), anything else
// (kept with its body: tests assert there is none), or no answer (connection refused or cut, timeout).
// Requests go round robin to `targets()`: the tests take a node out before they stop or kill it, as a
// load balancer would. The load is bounded in time (`maxMs`) and stops by itself.

import { randomUUID } from 'node:crypto'
import { partitionOf } from '../../src/cluster/partition.js'
import { admin, type Tenant } from './beacon.js'

export interface LoadOptions {
  tenant: Tenant
  /** The base URLs to send to now (called per request). */
  targets: () => string[]
  /** Requests in flight at once. */
  concurrency?: number
  visitors?: number
  profiles?: number
  /** The load stops by itself after this long. */
  maxMs?: number
  /** The cluster's partition count (problems name each key's partition). */
  partitions?: number
}

interface AttributeKey {
  kind: 'visitor' | 'profile'
  id: string
  /** The last value acknowledged (200), undefined while none was. */
  acked: number | undefined
  /** Values attempted after the last acknowledged one, not acknowledged themselves. */
  pending: number[]
  busy: boolean
}

interface Purchases {
  visitorId: string
  /** Order ids acknowledged at least once. */
  acked: Set<string>
  /** Distinct order ids attempted (acknowledged or not). */
  attempted: Set<string>
  next: number
}

/** An answer that is neither 200 nor 503 with Retry-After, or no answer at all. */
export interface Unexpected {
  url: string
  path: string
  status: number | 'no answer'
  detail: string
}

export interface LoadCounts {
  requests: number
  ok: number
  /** 503 with Retry-After, by error code. */
  retryAfter: Record<string, number>
  unexpected: Unexpected[]
  acknowledged: { attributes: number, purchases: number, replays: number }
}

/** Purchases per visitor stay below the 256 order ids a visitor remembers (actors/visitor.ts ORDER_IDS_MAX). */
const ORDERS_PER_VISITOR_MAX = 200
const REQUEST_TIMEOUT_MS = 30_000
const PURCHASE_RETRIES = 3
/** Reads of one key in verify while they are 503s with Retry-After. */
const VERIFY_TRIES = 5

export class ClusterLoad {
  private readonly tenant: Tenant
  private readonly targets: () => string[]
  private readonly concurrency: number
  private readonly maxMs: number
  private readonly partitions: number
  private readonly keys: AttributeKey[] = []
  private readonly purchases = new Map<string, Purchases>()
  private value = 0
  private turn = 0
  private running = false
  private workers: Array<Promise<void>> = []
  private readonly inflight = new Map<string, number>()
  private counts: LoadCounts = emptyCounts()
  /** Reads of verify answered 503 with Retry-After and made again (a partition changing hands then). */
  verifyRetries = 0

  constructor (options: LoadOptions) {
    this.tenant = options.tenant
    this.targets = options.targets
    this.concurrency = options.concurrency ?? 64
    this.maxMs = options.maxMs ?? 300_000
    this.partitions = options.partitions ?? 64
    for (let i = 0; i < (options.visitors ?? 400); i++) {
      const id = randomUUID()
      this.keys.push({ kind: 'visitor', id, acked: undefined, pending: [], busy: false })
      this.purchases.set(id, { visitorId: id, acked: new Set(), attempted: new Set(), next: 0 })
    }
    for (let i = 0; i < (options.profiles ?? 100); i++) {
      this.keys.push({ kind: 'profile', id: `load-${randomUUID()}@example.com`, acked: undefined, pending: [], busy: false })
    }
  }

  /** Starts the workers (counts start from zero). */
  start (): void {
    if (this.running) throw new Error('the load is running')
    this.running = true
    this.counts = emptyCounts()
    const deadline = Date.now() + this.maxMs
    this.workers = Array.from({ length: this.concurrency }, async () => {
      while (this.running && Date.now() < deadline) await this.step()
    })
  }

  /** Stops the workers, waits for the requests in flight, and answers what this run counted. */
  async stop (): Promise<LoadCounts> {
    this.running = false
    await Promise.all(this.workers)
    this.workers = []
    return this.counts
  }

  /** Requests of this load in flight to `url` now. */
  inflightTo (url: string): number {
    return this.inflight.get(url) ?? 0
  }

  /** Counts so far (while running). */
  now (): LoadCounts {
    return this.counts
  }

  /**
   * Reads every written key back through `url` and lists each mismatch with the ledger (empty: all
   * acknowledged writes present, counts within acknowledged..attempted).
   */
  async verify (url: string): Promise<string[]> {
    const problems: string[] = []
    const { account, token } = this.tenant
    /** A read, again after its Retry-After while it is a 503 that has one. */
    const read = async (send: () => Promise<{ status: number, body: any, retryAfter: string | null }>): Promise<{ status: number, body: any }> => {
      for (let attempt = 1; ; attempt++) {
        const answer = await send()
        if (answer.status !== 503 || answer.retryAfter === null || attempt === VERIFY_TRIES) return answer
        this.verifyRetries++
        await new Promise(resolve => setTimeout(resolve, Number(answer.retryAfter) * 1000))
      }
    }
    const check = async (key: AttributeKey): Promise<void> => {
      const name = `${key.kind} ${key.id} (partition ${partitionOf(account, key.id, this.partitions)})`
      const purchases = key.kind === 'visitor' ? this.purchases.get(key.id)! : null
      if (key.acked === undefined && key.pending.length === 0 && (purchases === null || purchases.attempted.size === 0)) return
      let count: unknown = 0
      if (purchases !== null) {
        const res = await read(async () => {
          const answer = await admin(url, 'GET', `/admin/accounts/${account}/visitors/${key.id}`)
          return { ...answer, retryAfter: answer.headers.get('retry-after') }
        })
        if (res.status === 404 && key.acked === undefined && purchases.acked.size === 0) return
        if (res.status !== 200) {
          problems.push(`${name}: GET answered ${res.status} ${JSON.stringify(res.body)}`)
          return
        }
        count = res.body.purchases
      }
      const query = key.kind === 'visitor' ? { path: '/visitors/query', key: { visitorId: key.id } } : { path: '/profiles/query', key: { profileId: key.id } }
      const res = await read(async () => {
        const answer = await fetch(url + query.path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ account, token, ...query.key }) })
        return { status: answer.status, body: await answer.json(), retryAfter: answer.headers.get('retry-after') }
      })
      const body = res.body
      if (res.status === 404 && key.acked === undefined) return
      if (res.status !== 200) {
        problems.push(`${name}: query answered ${res.status} ${JSON.stringify(body)}`)
        return
      }
      const n: unknown = body.attributes?.n?.[0]?.value
      const allowed = [key.acked, ...key.pending]
      if (!allowed.includes(n as number | undefined)) problems.push(`${name}: n = ${String(n)}, acknowledged ${String(key.acked)}, attempted since ${JSON.stringify(key.pending)}`)
      if (purchases !== null && (typeof count !== 'number' || count < purchases.acked.size || count > purchases.attempted.size)) {
        problems.push(`${name}: ${String(count)} purchases, acknowledged ${purchases.acked.size}, attempted ${purchases.attempted.size}`)
      }
    }
    let next = 0
    await Promise.all(Array.from({ length: 32 }, async () => {
      while (next < this.keys.length) await check(this.keys[next++]!)
    }))
    return problems
  }

  /** How many keys and purchases the ledger holds as acknowledged. */
  ledger (): { attributes: number, purchases: number, visitorsWithPurchases: number } {
    let attributes = 0
    let purchases = 0
    let visitorsWithPurchases = 0
    for (const key of this.keys) if (key.acked !== undefined) attributes++
    for (const visitor of this.purchases.values()) {
      purchases += visitor.acked.size
      if (visitor.acked.size > 0) visitorsWithPurchases++
    }
    return { attributes, purchases, visitorsWithPurchases }
  }

  private async step (): Promise<void> {
    const key = this.pick()
    if (key === null) {
      await new Promise(resolve => setTimeout(resolve, 5))
      return
    }
    key.busy = true
    try {
      const roll = Math.random()
      if (key.kind === 'visitor' && roll < 0.5) await this.purchase(this.purchases.get(key.id)!)
      else await this.writeAttribute(key)
    } finally {
      key.busy = false
    }
  }

  private pick (): AttributeKey | null {
    for (let tries = 0; tries < 8; tries++) {
      const key = this.keys[Math.floor(Math.random() * this.keys.length)]!
      if (!key.busy) return key
    }
    return null
  }

  private async writeAttribute (key: AttributeKey): Promise<void> {
    const { account, token } = this.tenant
    const n = ++this.value
    key.pending.push(n)
    const body = key.kind === 'visitor' ? { account, token, visitorId: key.id, attributes: { n } } : { account, token, profileId: key.id, attributes: { n } }
    const ok = await this.send(key.kind === 'visitor' ? '/visitors/attributes' : '/profiles/attributes', body)
    if (!ok) return
    key.acked = n
    key.pending = []
    this.counts.acknowledged.attributes++
  }

  private async purchase (visitor: Purchases): Promise<void> {
    const { account } = this.tenant
    // Now and then an acknowledged order sent again: it must not count twice.
    const replay = visitor.acked.size > 0 && Math.random() < 0.1
    let orderId: string
    if (replay) orderId = [...visitor.acked][Math.floor(Math.random() * visitor.acked.size)]!
    else if (visitor.next < ORDERS_PER_VISITOR_MAX) orderId = `${visitor.visitorId}-o${visitor.next++}`
    else return
    visitor.attempted.add(orderId)
    const body = { account, visitorId: visitor.visitorId, platform: 'web', event: 'purchase', orderId, orderTotal: 1 }
    for (let attempt = 0; attempt <= PURCHASE_RETRIES && this.running; attempt++) {
      if (await this.send('/campaigns/query', body)) {
        if (replay) this.counts.acknowledged.replays++
        else if (!visitor.acked.has(orderId)) this.counts.acknowledged.purchases++
        visitor.acked.add(orderId)
        return
      }
      await new Promise(resolve => setTimeout(resolve, 50))
    }
  }

  /** One request to the next target; true when answered 200. */
  private async send (path: string, body: unknown): Promise<boolean> {
    const targets = this.targets()
    if (targets.length === 0) return false
    const url = targets[this.turn++ % targets.length]!
    this.counts.requests++
    this.inflight.set(url, (this.inflight.get(url) ?? 0) + 1)
    let res: Response
    let text: string
    try {
      res = await fetch(url + path, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      })
      text = await res.text()
    } catch (error) {
      this.counts.unexpected.push({ url, path, status: 'no answer', detail: String((error as Error).cause ?? error) })
      return false
    } finally {
      this.inflight.set(url, this.inflight.get(url)! - 1)
    }
    if (res.status === 200) {
      this.counts.ok++
      return true
    }
    let code = ''
    try {
      code = String(JSON.parse(text)?.errors?.[0]?.code ?? '')
    } catch {}
    if (res.status === 503 && res.headers.get('retry-after') !== null) {
      this.counts.retryAfter[code] = (this.counts.retryAfter[code] ?? 0) + 1
    } else {
      this.counts.unexpected.push({ url, path, status: res.status, detail: `${code} ${text.slice(0, 300)}` })
    }
    return false
  }
}

function emptyCounts (): LoadCounts {
  return { requests: 0, ok: 0, retryAfter: {}, unexpected: [], acknowledged: { attributes: 0, purchases: 0, replays: 0 } }
}

/** "12 unavailable, 3 partition_moved" (or "none"). */
export function describeRetryAfter (counts: LoadCounts): string {
  const entries = Object.entries(counts.retryAfter)
  return entries.length === 0 ? 'none' : entries.map(([code, n]) => `${n} ${code}`).join(', ')
}

export function retryAfterTotal (counts: LoadCounts): number {
  return Object.values(counts.retryAfter).reduce((a, b) => a + b, 0)
}
