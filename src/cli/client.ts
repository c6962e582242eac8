// The admin API over HTTP, as the CLI uses it: where Beacon is and which key to send, and each answer
// turned into its JSON body or a CliError that prints the server's refusal as it was given.

import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { ADMIN_KEY_FILE } from '../admin-key.js'
import { CliError, UsageError } from './errors.js'

export const DEFAULT_URL = 'http://127.0.0.1:8080'
/** An answer slower than this is given up on (export and import make one request per item). */
export const REQUEST_TIMEOUT_MS = 30_000

type Env = Record<string, string | undefined>

export interface Connection {
  url: string
  adminKey: string
}

interface ErrorBody {
  status: number
  message: string
  errors?: { code: string, field?: string, message: string }[]
}

/** A refusal from the server: its status and body, as received. */
export class RefusedError extends CliError {
  readonly status: number
  readonly body: ErrorBody | null
  constructor (what: string, status: number, body: ErrorBody | null) {
    super(`the server refused ${what}: ${describe(status, body)}`)
    this.status = status
    this.body = body
  }

  /** The first error code, e.g. account_not_found. */
  get code (): string | undefined {
    return this.body?.errors?.[0]?.code
  }
}

function describe (status: number, body: ErrorBody | null): string {
  if (body === null) return `HTTP ${status}`
  const items = body.errors ?? []
  const head = `${status} ${items[0]?.code ?? ''} ${body.message}`.replace(/\s+/g, ' ')
  const details = items.map(item => `\n  ${item.code}${item.field === undefined ? '' : ` ${item.field}`}: ${item.message}`)
  return head + (items.length > 1 || (items[0] !== undefined && items[0].message !== body.message) ? details.join('') : '')
}

/**
 * Where Beacon is: --url, else BEACON_URL, else the address the server itself listens on when started
 * with the same environment (BEACON_HOST and BEACON_PORT, as src/config.ts reads them), so a shell that
 * started Beacon with `BEACON_PORT=9090 npm start` finds it with `npx beacon …` and nothing more.
 */
export function resolveConnection (options: { url?: string, 'admin-key'?: string }, env: Env = process.env): Connection {
  const given = options.url ?? nonEmpty(env.BEACON_URL)
  const url = (given ?? listenUrl(env)).replace(/\/+$/, '')
  try {
    const parsed = new URL(url)
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new TypeError('not http')
  } catch {
    throw new UsageError(`${options.url !== undefined ? '--url' : 'BEACON_URL'}: expected an http:// or https:// URL like ${DEFAULT_URL}`)
  }
  return { url, adminKey: resolveAdminKey(options['admin-key'], env) }
}

function nonEmpty (value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value.trim()
}

/** The URL of a server started with this environment's BEACON_HOST and BEACON_PORT (defaults 127.0.0.1, 8080). */
export function listenUrl (env: Env): string {
  const rawPort = nonEmpty(env.BEACON_PORT)
  const port = rawPort === undefined ? 8080 : Number(rawPort)
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new UsageError(`BEACON_PORT=${JSON.stringify(rawPort)}: expected a whole number from 0 to 65535 (or pass --url)`)
  }
  if (port === 0) throw new UsageError('BEACON_PORT=0 lets the server pick a free port, which the CLI cannot know: pass --url or set BEACON_URL to the port its log line "beacon started" names')
  let host = nonEmpty(env.BEACON_HOST) ?? '127.0.0.1'
  // A server listening on every interface is reached on loopback.
  if (host === '0.0.0.0') host = '127.0.0.1'
  else if (host === '::' || host === '[::]') host = '[::1]'
  else if (host.includes(':') && !host.startsWith('[')) host = `[${host}]`
  return `http://${host}:${port}`
}

function resolveAdminKey (option: string | undefined, env: Env): string {
  if (option !== undefined && option !== '') return option
  if (env.BEACON_ADMIN_KEY !== undefined && env.BEACON_ADMIN_KEY !== '') return env.BEACON_ADMIN_KEY
  const file = join(env.BEACON_DATA_DIR || './data', ADMIN_KEY_FILE)
  try {
    return readFileSync(file, 'utf8').trim()
  } catch {
    throw new UsageError(`no admin key: pass --admin-key, set BEACON_ADMIN_KEY, or set BEACON_DATA_DIR to the folder holding ${ADMIN_KEY_FILE} (tried ${file})`)
  }
}

export class AdminClient {
  private readonly connection: Connection

  constructor (connection: Connection) {
    this.connection = connection
  }

  /** Send one request; resolve with the answer's JSON body, or throw RefusedError / CliError. */
  async request<T = unknown> (method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.connection.adminKey}` }
    if (body !== undefined) headers['content-type'] = 'application/json'
    let res: Response
    try {
      res = await fetch(this.connection.url + path, {
        method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      })
    } catch (error) {
      const cause = (error as { cause?: { code?: string, message?: string } }).cause
      const why = cause?.code ?? cause?.message ?? (error as Error).message
      throw new CliError(`cannot reach Beacon at ${this.connection.url} (${why}); is it running? Set --url or BEACON_URL, or the BEACON_HOST and BEACON_PORT it was started with.`)
    }
    const text = await res.text()
    let parsed: unknown = null
    try {
      parsed = text === '' ? null : JSON.parse(text)
    } catch {
      throw new CliError(`${method} ${path}: expected JSON from ${this.connection.url}, got HTTP ${res.status}: ${text.slice(0, 200)}`)
    }
    if (!res.ok) throw new RefusedError(`${method} ${path}`, res.status, isErrorBody(parsed) ? parsed : null)
    return parsed as T
  }

  /** A request with its own body and options (an upload); the answer's JSON body, or RefusedError / CliError. */
  async send<T = unknown> (path: string, init: RequestInit): Promise<T> {
    let res: Response
    try {
      res = await fetch(this.connection.url + path, { ...init, headers: { ...init.headers as Record<string, string>, authorization: `Bearer ${this.connection.adminKey}` } })
    } catch (error) {
      const cause = (error as { cause?: { code?: string, message?: string } }).cause
      throw new CliError(`cannot reach Beacon at ${this.connection.url} (${cause?.code ?? cause?.message ?? (error as Error).message}); is it running? Set --url or BEACON_URL.`)
    }
    const text = await res.text()
    let parsed: unknown = null
    try {
      parsed = text === '' ? null : JSON.parse(text)
    } catch {
      throw new CliError(`${init.method ?? 'GET'} ${path}: expected JSON from ${this.connection.url}, got HTTP ${res.status}: ${text.slice(0, 200)}`)
    }
    if (!res.ok) throw new RefusedError(`${init.method ?? 'GET'} ${path}`, res.status, isErrorBody(parsed) ? parsed : null)
    return parsed as T
  }

  /**
   * GET a streamed answer (an export): its body as it arrives, or RefusedError / CliError. No overall
   * timeout: an export of a month may take a while; the server's own limits end a stalled one.
   */
  async stream (path: string): Promise<ReadableStream<Uint8Array>> {
    let res: Response
    try {
      res = await fetch(this.connection.url + path, { headers: { authorization: `Bearer ${this.connection.adminKey}` } })
    } catch (error) {
      const cause = (error as { cause?: { code?: string, message?: string } }).cause
      throw new CliError(`cannot reach Beacon at ${this.connection.url} (${cause?.code ?? cause?.message ?? (error as Error).message}); is it running? Set --url or BEACON_URL.`)
    }
    if (!res.ok || res.body === null) {
      const text = await res.text()
      let parsed: unknown = null
      try {
        parsed = text === '' ? null : JSON.parse(text)
      } catch {}
      throw new RefusedError(`GET ${path}`, res.status, isErrorBody(parsed) ? parsed : null)
    }
    return res.body
  }
}

/**
 * POST a body streamed as it is read (an import's file): the answer's JSON body, or RefusedError /
 * CliError. No overall timeout: the upload of a large file takes as long as it takes.
 */
export async function upload<T = unknown> (client: AdminClient, path: string, body: AsyncIterable<Uint8Array>, contentType: string): Promise<T> {
  return client.send<T>(path, { method: 'POST', headers: { 'content-type': contentType }, body: body as unknown as ReadableStream, duplex: 'half' } as RequestInit)
}

/** Every item of an admin listing, walking its pages (`?cursor=` the previous page's `next`). */
export async function listAll<T> (client: AdminClient, path: string, key: string): Promise<T[]> {
  const items: T[] = []
  let cursor: string | null = ''
  while (cursor !== null) {
    const page: Record<string, unknown> = await client.request('GET', `${path}?limit=${LIST_ALL_PAGE}${cursor === '' ? '' : `&cursor=${encodeURIComponent(cursor)}`}`)
    items.push(...page[key] as T[])
    cursor = typeof page.next === 'string' ? page.next : null
  }
  return items
}

/** The page size listAll asks for (the server's largest). */
const LIST_ALL_PAGE = 500

function isErrorBody (value: unknown): value is ErrorBody {
  return typeof value === 'object' && value !== null && typeof (value as ErrorBody).message === 'string'
}

/** A path segment as sent: names and ids may hold characters that mean something in a URL. */
export function segment (value: string): string {
  return encodeURIComponent(value)
}
