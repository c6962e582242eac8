// Test harness: a real Beacon process (the built dist/, as `npm start` runs it) on a random port with
// a real LMDB folder in a temp dir, driven over real HTTP.

import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createHmac, randomUUID } from 'node:crypto'
import { once } from 'node:events'
import { reapAtExit } from './children.js'

export const ADMIN_KEY = 'test-admin-key-0123456789'
const MAIN = new URL('../../dist/src/main.js', import.meta.url).pathname

export interface BeaconProcess {
  url: string
  port: number
  dataDir: string
  child: ChildProcess
  /** Everything the process wrote to stdout and stderr so far. */
  output: () => string
  /** SIGKILL and wait for exit. */
  kill: () => Promise<void>
  /** SIGTERM and wait for exit; resolves with the exit code. */
  stop: () => Promise<number | null>
}

export interface StartOptions {
  dataDir?: string
  env?: Record<string, string>
  /** How long the start may take before it is given up (the process killed). Default: by mode, below. */
  startTimeoutMs?: number
}

/** An embedded Beacon: process start and opening its LMDB folder; a few seconds on this loaded machine. */
export const EMBEDDED_START_MS = 15_000

/**
 * A cluster node (BEACON_CLUSTER set): on top of the process start, a node of a new cluster creates its
 * replicated (R3) streams and buckets one after another, and nats-server 2.10 answers each creation from
 * the new stream's leader once elected. A new group's preferred leader campaigns at once, but when its
 * vote request reaches followers that have not applied the assignment yet (a loaded machine) the next
 * campaign waits for the raft election timeout, 4–9 s (raft.go, minElectionTimeoutDefault and
 * maxElectionTimeoutDefault): the embedded limit plus three such misses at the longest timeout. A start
 * that hangs still fails. docs/internals/cluster.md, "Moving to nats-server 2.10".
 */
export const CLUSTER_NODE_START_MS = EMBEDDED_START_MS + 3 * 9_000 + 3_000

export function tempDir (prefix = 'beacon-test-'): string {
  return mkdtempSync(join(tmpdir(), prefix))
}

export async function startBeacon ({ dataDir = tempDir(), env = {}, startTimeoutMs }: StartOptions = {}): Promise<BeaconProcess> {
  const limitMs = startTimeoutMs ?? (env.BEACON_CLUSTER === undefined ? EMBEDDED_START_MS : CLUSTER_NODE_START_MS)
  const child = spawn(process.execPath, [MAIN], {
    env: {
      PATH: process.env.PATH ?? '',
      BEACON_HOST: '127.0.0.1',
      BEACON_PORT: '0',
      BEACON_DATA_DIR: dataDir,
      BEACON_ADMIN_KEY: ADMIN_KEY,
      BEACON_LOG_LEVEL: 'info',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  reapAtExit(child)
  let output = ''
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => { output += chunk })
  const port = await new Promise<number>((resolve, reject) => {
    // A start given up is not left running: nothing would stop it.
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`beacon did not start within ${limitMs / 1000} s:\n${output}`)) }, limitMs)
    const onData = (): void => {
      const match = /"port":(\d+),[^\n]*"msg":"beacon started"/.exec(output)
      if (match === null) return
      clearTimeout(timer)
      child.stdout!.off('data', onData)
      resolve(Number(match[1]))
    }
    child.stdout!.on('data', onData)
    child.once('exit', code => { clearTimeout(timer); reject(new Error(`beacon exited with ${code} before starting:\n${output}`)) })
  })
  const exited = once(child, 'exit')
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    dataDir,
    child,
    output: () => output,
    async kill () {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
      await exited
    },
    async stop () {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
      const [code] = await exited
      return code as number | null
    },
  }
}

export function removeDir (dir: string): void {
  rmSync(dir, { recursive: true, force: true })
}

export interface Answer<T = any> {
  status: number
  headers: Headers
  body: T
}

/** POST a JSON body (or raw text with a content type of your choosing) and read the JSON answer. */
export async function post<T = any> (base: string, path: string, body: unknown, init: { contentType?: string, raw?: boolean, headers?: Record<string, string> } = {}): Promise<Answer<T>> {
  const res = await fetch(base + path, {
    method: 'POST',
    headers: { 'content-type': init.contentType ?? 'application/json', ...init.headers },
    body: init.raw === true ? body as string : JSON.stringify(body),
  })
  return { status: res.status, headers: res.headers, body: await readJson(res) }
}

/** Call the admin API with the test admin key. */
export async function admin<T = any> (base: string, method: string, path: string, body?: unknown, key = ADMIN_KEY): Promise<Answer<T>> {
  const headers: Record<string, string> = { authorization: `Bearer ${key}` }
  if (body !== undefined) headers['content-type'] = 'application/json'
  const res = await fetch(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
  return { status: res.status, headers: res.headers, body: await readJson(res) }
}

async function readJson (res: Response): Promise<any> {
  const text = await res.text()
  if (text === '') return null
  try {
    return JSON.parse(text)
  } catch {
    throw new Error(`expected JSON, got ${res.status}: ${text.slice(0, 200)}`)
  }
}

export interface Tenant {
  account: string
  /** A read-write token for every attribute. */
  token: string
  /** The account's identity secret (profileIdSignature is the hex HMAC-SHA256 of a profileId under it). */
  identitySecret: string
}

/** Create an account and a read-write token for all attributes. */
export async function createTenant (base: string, name = 'Test site'): Promise<Tenant> {
  const created = await admin(base, 'POST', '/admin/accounts', { name })
  if (created.status !== 201) throw new Error(`account creation failed: ${JSON.stringify(created.body)}`)
  const account = created.body.account as string
  const token = await createToken(base, account, { name: 'all', attributes: ['*'], access: 'read-write' })
  return { account, token, identitySecret: created.body.identitySecret as string }
}

/** The usual start of a describe block: a Beacon process and one tenant on it. */
export async function startWithTenant (options: StartOptions = {}): Promise<{ beacon: BeaconProcess, tenant: Tenant }> {
  const beacon = await startBeacon(options)
  return { beacon, tenant: await createTenant(beacon.url) }
}

/** The usual end: the process killed (its folder goes too, so there is nothing to flush) and its data folder removed. */
export async function discardBeacon (beacon: BeaconProcess | undefined): Promise<void> {
  if (beacon === undefined) return
  await beacon.kill()
  removeDir(beacon.dataDir)
}

/** The profileIdSignature of `profileId` under `secret`, as a site's backend makes it. */
export function signProfile (secret: string, profileId: string): string {
  return createHmac('sha256', secret).update(profileId).digest('hex')
}

/** The profileId of an event with its signature, to spread into an event body. */
export function identified (tenant: Tenant, profileId: string): { profileId: string, profileIdSignature: string } {
  return { profileId, profileIdSignature: signProfile(tenant.identitySecret, profileId) }
}

export async function createToken (base: string, account: string, spec: Record<string, unknown>): Promise<string> {
  const res = await admin(base, 'POST', `/admin/accounts/${account}/tokens`, spec)
  if (res.status !== 201) throw new Error(`token creation failed: ${JSON.stringify(res.body)}`)
  return res.body.token as string
}

/** The secret part of an API token `bk_<16 hex id>_<secret>` (base64url: it may hold '_' itself). */
export function tokenSecret (token: string): string {
  const match = /^bk_[0-9a-f]{16}_(.+)$/.exec(token)
  if (match === null) throw new Error(`not an API token: ${token}`)
  return match[1]!
}

export function visitorId (): string {
  return randomUUID()
}
