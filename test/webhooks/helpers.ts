// Real components for the webhook tests: an HTTP(S) receiver and an HTTP proxy on 127.0.0.1 port 0,
// a manual clock and scheduler the tests drive, and small builders for configurations and items.

import http, { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http'
import https from 'node:https'
import net, { type AddressInfo, type Socket } from 'node:net'
import { readFileSync } from 'node:fs'
import { once } from 'node:events'
import type { ManualClock } from '../helpers/clock.js'
import { until } from '../helpers/until.js'
import { compileWebhook, type CompiledWebhook, type DeliveryItem } from '../../src/webhooks/index.js'
import type { Scheduler } from '../../src/delivery/worker.js'

export const TEST_CERT = readFileSync(new URL('./fixtures/test-cert.pem', import.meta.url), 'utf8')
const TEST_KEY = readFileSync(new URL('./fixtures/test-key.pem', import.meta.url), 'utf8')

export interface Received {
  method: string
  url: string
  headers: IncomingHttpHeaders
  body: string
  /** The client's port: the same port on two requests means the socket was reused. */
  remotePort: number
}

export interface Reply {
  status: number
  headers?: Record<string, string>
  body?: string
}

/** How the receiver answers request number `index` (0-based): a reply, or 'hang' to never answer. */
export type Responder = (request: Received, index: number) => Reply | 'hang'

export interface Receiver {
  url: string
  port: number
  requests: Received[]
  /** Requests answered 'hang' and still open: answer them with release(). */
  hanging: ServerResponse[]
  release (reply?: Reply): void
  close (): Promise<void>
}

export async function startReceiver (respond: Responder = () => ({ status: 200 }), options: { tls?: boolean } = {}): Promise<Receiver> {
  const requests: Received[] = []
  const hanging: ServerResponse[] = []
  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const received: Received = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), remotePort: req.socket.remotePort ?? 0 }
      const index = requests.length
      requests.push(received)
      const reply = respond(received, index)
      if (reply === 'hang') {
        hanging.push(res)
        return
      }
      answer(res, reply)
    })
  }
  const server = options.tls === true ? https.createServer({ cert: TEST_CERT, key: TEST_KEY }, handler) : http.createServer(handler)
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const port = (server.address() as AddressInfo).port
  return {
    url: `${options.tls === true ? 'https' : 'http'}://127.0.0.1:${port}`,
    port,
    requests,
    hanging,
    release (reply: Reply = { status: 200 }) {
      for (const res of hanging.splice(0)) answer(res, reply)
    },
    async close () {
      server.closeAllConnections()
      server.close()
      await once(server, 'close')
    },
  }
}

function answer (res: ServerResponse, reply: Reply): void {
  res.writeHead(reply.status, reply.headers)
  res.end(reply.body ?? '')
}

export interface SeenByProxy {
  /** 'CONNECT' for tunnels, else the forwarded method. */
  method: string
  /** Absolute URI for forwarded requests, host:port for CONNECT. */
  target: string
}

export interface Proxy {
  url: string
  seen: SeenByProxy[]
  close (): Promise<void>
}

/** A forwarding HTTP proxy: absolute-URI requests are forwarded (or answered, for *.test), CONNECT opens a TCP tunnel. */
export async function startProxy (): Promise<Proxy> {
  const seen: SeenByProxy[] = []
  const sockets = new Set<Socket>()
  const server = http.createServer((req, res) => {
    seen.push({ method: req.method ?? '', target: req.url ?? '' })
    const target = new URL(req.url ?? '')
    if (target.hostname.endsWith('.test')) {
      // Names under .test (RFC 6761) never resolve: the proxy answers for them itself.
      req.resume()
      res.writeHead(200)
      res.end('answered by the proxy')
      return
    }
    const upstream = http.request(target, { method: req.method, headers: req.headers }, (upstreamRes) => {
      res.writeHead(upstreamRes.statusCode ?? 502, upstreamRes.headers)
      upstreamRes.pipe(res)
    })
    upstream.on('error', () => { res.writeHead(502); res.end() })
    req.pipe(upstream)
  })
  server.on('connect', (req: IncomingMessage, client: Socket, head: Buffer) => {
    seen.push({ method: 'CONNECT', target: req.url ?? '' })
    const [host, port] = (req.url ?? '').split(':')
    const upstream = net.connect(Number(port), host, () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n')
      upstream.write(head)
      upstream.pipe(client)
      client.pipe(upstream)
    })
    sockets.add(upstream)
    sockets.add(client)
    upstream.on('error', () => client.destroy())
    client.on('error', () => upstream.destroy())
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const port = (server.address() as AddressInfo).port
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    async close () {
      for (const socket of sockets) socket.destroy()
      server.closeAllConnections()
      server.close()
      await once(server, 'close')
    },
  }
}

interface Timer { id: number, atMs: number, fn: () => void }

/** Timers fire only when the test advances the clock. */
export class ManualScheduler implements Scheduler {
  private readonly clock: ManualClock
  private timers: Timer[] = []
  private nextId = 1

  constructor (clock: ManualClock) {
    this.clock = clock
  }

  setTimer (ms: number, fn: () => void): unknown {
    const timer = { id: this.nextId++, atMs: this.clock.ms + ms, fn }
    this.timers.push(timer)
    return timer.id
  }

  clearTimer (handle: unknown): void {
    this.timers = this.timers.filter(t => t.id !== handle)
  }

  get pending (): number {
    return this.timers.length
  }

  /** Move the clock forward, firing every timer that falls due on the way, in order. */
  advance (ms: number): void {
    const endMs = this.clock.ms + ms
    for (;;) {
      const due = this.timers.filter(t => t.atMs <= endMs).sort((a, b) => a.atMs - b.atMs)[0]
      if (due === undefined) break
      this.timers = this.timers.filter(t => t !== due)
      this.clock.ms = Math.max(this.clock.ms, due.atMs)
      due.fn()
    }
    this.clock.ms = endMs
  }
}

/** The shared until (test/helpers/until.ts), condition first as the delivery tests call it. */
export function waitFor (condition: () => boolean | Promise<boolean>, timeoutMs = 5000, what = 'condition'): Promise<void> {
  return until(what, condition, timeoutMs)
}

/** Let pending microtasks and I/O callbacks run. */
export async function settle (rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise(resolve => setImmediate(resolve))
}

export const ACCOUNT = '3f0c6b1e-6a55-4d8e-9d4b-7d2a0e5b1c11'
export const SECRET = 'whsec_' + Buffer.alloc(32, 42).toString('base64')

type Json = Record<string, unknown>

/** A valid configuration; `patch` merges into request and delivery (and may replace trigger). */
export function config (url: string, patch: { request?: Json, delivery?: Json, trigger?: Json, name?: string } = {}): Json {
  return {
    name: patch.name ?? 'test hook',
    enabled: true,
    trigger: patch.trigger ?? { kind: 'event', events: ['purchase'] },
    request: { method: 'POST', url, ...patch.request },
    delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1, ...patch.delivery },
  }
}

export function compiled (url: string, patch: Parameters<typeof config>[1] = {}, id = 'wh_1'): CompiledWebhook {
  return compileWebhook(id, ACCOUNT, config(url, patch), { allowPrivate: true })
}

let itemSeq = 0

export function item (fields: Partial<DeliveryItem['context']> = {}, occurredAtMs = Date.now()): DeliveryItem {
  itemSeq++
  return {
    id: `msg_${itemSeq.toString().padStart(6, '0')}`,
    occurredAtMs,
    context: { account: ACCOUNT, profileId: `user-${itemSeq}@example.com`, event: 'purchase', ...fields },
  }
}
