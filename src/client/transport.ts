// HTTP to the nodes: one undici Pool per node (keep-alive connections, reused by every call), each
// answer read whole and parsed as the API's JSON. Knows nothing of retries or routing (client.ts).

import { Pool } from 'undici'
import type { IncomingHttpHeaders } from 'node:http'
import { BeaconConnectionError } from './errors.js'

export interface Exchange {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'
  /** Path and query string, e.g. /admin/accounts?limit=10. */
  path: string
  headers: Record<string, string>
  /** The JSON text of the body, or null for none. */
  body: string | null
}

export interface Answer {
  status: number
  headers: IncomingHttpHeaders
  /** The parsed JSON body; null when empty. */
  body: unknown
}

export interface TransportOptions {
  /** Connections kept per node at most. */
  connectionsPerNode: number
  /** No answer (headers, then each part of the body) within this long: a `timeout` error. */
  timeoutMs: number
}

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT'])

export class Transport {
  private readonly pools = new Map<string, { pool: Pool, prefix: string }>()
  private readonly connectionsPerNode: number
  private readonly timeoutMs: number
  private closed = false

  constructor ({ connectionsPerNode, timeoutMs }: TransportOptions) {
    this.connectionsPerNode = connectionsPerNode
    this.timeoutMs = timeoutMs
  }

  /** One exchange with the node at `baseUrl`; rejects with BeaconConnectionError (attempts 1: the caller counts). */
  async send (baseUrl: string, exchange: Exchange): Promise<Answer> {
    const { pool, prefix } = this.poolOf(baseUrl)
    let status: number
    let headers: IncomingHttpHeaders
    let text: string
    try {
      const res = await pool.request({
        method: exchange.method, path: (prefix + exchange.path) || '/', headers: exchange.headers, body: exchange.body,
        headersTimeout: this.timeoutMs, bodyTimeout: this.timeoutMs,
      })
      status = res.statusCode
      headers = res.headers
      text = await res.body.text()
    } catch (error) {
      const code = (error as { code?: string }).code ?? ''
      const timeout = TIMEOUT_CODES.has(code)
      const why = code === '' ? (error as Error).message : `${code}: ${(error as Error).message}`
      throw new BeaconConnectionError(timeout ? 'timeout' : 'connection_failed', `${exchange.method} ${exchange.path} at ${baseUrl}: ${timeout ? 'no answer in time' : 'no answer'} (${why})`, baseUrl, 1, error)
    }
    let body: unknown = null
    if (text !== '') {
      try {
        body = JSON.parse(text)
      } catch (error) {
        throw new BeaconConnectionError('bad_answer', `${exchange.method} ${exchange.path} at ${baseUrl}: expected JSON, got HTTP ${status}: ${text.slice(0, 200)}`, baseUrl, 1, error)
      }
    }
    return { status, headers, body }
  }

  async close (): Promise<void> {
    this.closed = true
    const pools = [...this.pools.values()]
    this.pools.clear()
    await Promise.all(pools.map(({ pool }) => pool.close()))
  }

  private poolOf (baseUrl: string): { pool: Pool, prefix: string } {
    let entry = this.pools.get(baseUrl)
    if (entry === undefined) {
      if (this.closed) throw new BeaconConnectionError('connection_failed', 'the client was closed', baseUrl, 1)
      const url = new URL(baseUrl)
      entry = { pool: new Pool(url.origin, { connections: this.connectionsPerNode }), prefix: url.pathname.replace(/\/+$/, '') }
      this.pools.set(baseUrl, entry)
    }
    return entry
  }
}
