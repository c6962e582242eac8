// A provider's contract double: a real HTTP server on 127.0.0.1 that hands every request to a
// provider-specific checker (which answers as the provider documents) unless a fault is queued: the
// next requests then get that answer (429 with Retry-After, a 5xx, a provider error body).

import http, { type IncomingMessage, type ServerResponse } from 'node:http'
import { once } from 'node:events'
import type { AddressInfo } from 'node:net'

export interface DoubleRequest {
  method: string
  path: string
  query: URLSearchParams
  headers: IncomingMessage['headers']
  body: string
  atMs: number
}

export interface DoubleReply {
  status: number
  body?: unknown
  headers?: Record<string, string>
}

export type Checker = (request: DoubleRequest) => DoubleReply

export class HttpDouble {
  readonly requests: DoubleRequest[] = []
  readonly replies: DoubleReply[] = []
  private readonly faults: DoubleReply[] = []
  private server: http.Server | null = null
  url = ''

  constructor (private readonly check: Checker, protected readonly nowMs: () => number = Date.now) {}

  async start (): Promise<this> {
    this.server = http.createServer((req, res) => this.handle(req, res))
    this.server.listen(0, '127.0.0.1')
    await once(this.server, 'listening')
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`
    return this
  }

  /** The next request (after those already queued) gets this answer instead of the checker's. */
  fail (reply: DoubleReply, times = 1): void {
    for (let i = 0; i < times; i++) this.faults.push(reply)
  }

  /** Every request body sent so far, as one text (to scan for what must never leave). */
  allBodies (): string {
    return this.requests.map(request => request.path + '?' + request.query.toString() + ' ' + request.body).join('\n')
  }

  async close (): Promise<void> {
    if (this.server === null) return
    this.server.closeAllConnections()
    this.server.close()
    await once(this.server, 'close')
  }

  private handle (req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://double')
      const request: DoubleRequest = { method: req.method ?? '', path: url.pathname, query: url.searchParams, headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), atMs: this.nowMs() }
      this.requests.push(request)
      let reply: DoubleReply
      try {
        reply = this.faults.shift() ?? this.check(request)
      } catch (error) {
        reply = { status: 500, body: { error: `double failed: ${String(error)}` } }
      }
      this.replies.push(reply)
      res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers })
      res.end(reply.body === undefined ? '' : JSON.stringify(reply.body))
    })
  }
}

/** JSON of a body, or undefined. */
export function parseJson (text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

export const SHA256 = /^[0-9a-f]{64}$/
