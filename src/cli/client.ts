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

export function resolveConnection (options: { url?: string, 'admin-key'?: string }, env: Env = process.env): Connection {
  const url = (options.url ?? env.BEACON_URL ?? DEFAULT_URL).replace(/\/+$/, '')
  try {
    const parsed = new URL(url)
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new TypeError('not http')
  } catch {
    throw new UsageError(`--url: expected an http:// or https:// URL like ${DEFAULT_URL}`)
  }
  return { url, adminKey: resolveAdminKey(options['admin-key'], env) }
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
      throw new CliError(`cannot reach Beacon at ${this.connection.url} (${why}); is it running? Set --url or BEACON_URL.`)
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
