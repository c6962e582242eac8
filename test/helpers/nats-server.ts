// A real nats-server (the release fetched by scripts/fetch-nats-server.sh into .cache/, 2.10.x;
// BEACON_TEST_NATS_SERVER overrides it) with JetStream, on a random free port of
// 127.0.0.1 and a temp store dir, for tests and benchmarks. stop() and restart() keep the port and the
// store dir, so a restart is the same server coming back with its streams and consumers.
// Never the shared server on 127.0.0.1:4222.

import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import net, { type AddressInfo } from 'node:net'
import { reapAtExit } from './children.js'

const FETCHED = new URL('../../.cache/nats-server/usr/sbin/nats-server', import.meta.url).pathname

/** The nats-server binary tests and benchmarks run: BEACON_TEST_NATS_SERVER, else the fetched release. */
export function natsServerBin (): string {
  if (process.env.BEACON_TEST_NATS_SERVER !== undefined) return process.env.BEACON_TEST_NATS_SERVER
  if (!existsSync(FETCHED)) {
    throw new Error(`no nats-server at ${FETCHED}: run scripts/fetch-nats-server.sh (npm test does), or set BEACON_TEST_NATS_SERVER`)
  }
  return FETCHED
}

export interface NatsServer {
  /** nats://127.0.0.1:<port> */
  url: string
  port: number
  storeDir: string
  /** Is the process running? */
  readonly running: boolean
  /** The running process's pid (null while stopped). */
  readonly pid: number | null
  /** Everything the server logged so far (its last 64 KiB). */
  output (): string
  /** SIGTERM (a clean shutdown) and wait for exit; SIGKILL after 10 s. */
  stop (): Promise<void>
  /** SIGKILL and wait for exit. */
  kill (): Promise<void>
  /** Start again on the same port and store dir (after stop or kill). */
  restart (): Promise<void>
  /** Stop, and remove the store dir. */
  close (): Promise<void>
}

export interface NatsServerOptions {
  /** Default: a new temp dir (removed by close()). */
  storeDir?: string
  /** Default: a free port picked now. */
  port?: number
  /** Extra command-line arguments. */
  args?: string[]
  /** The nats-server binary. Default: natsServerBin(). */
  bin?: string
  /**
   * A configuration to run (`-c`, written beside the store dir), e.g. a shipped file with its ports
   * replaced: its `store_dir` is replaced by the store dir here (the server refuses it twice); the
   * client port and address given here win over its `listen`.
   */
  config?: string
  /** Environment variables for the server (a configuration file's `$NAME` references). */
  env?: Record<string, string>
}

/**
 * A port free right now (another process may take it before it is used: callers that can, try again).
 * A connection in the moment it listens (a cluster member of another test redialing its peer's old
 * route port) is dropped at once, so the close waits for nothing.
 */
export async function freePort (): Promise<number> {
  const server = net.createServer(socket => socket.destroy())
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', resolve)
  })
  const port = (server.address() as AddressInfo).port
  await new Promise<void>(resolve => server.close(() => resolve()))
  return port
}

/** Resolves once a TCP connection to the port succeeds and the server sent its INFO line. */
async function waitForInfo (port: number, timeoutMs: number, exited: () => string | null): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const why = exited()
    if (why !== null) throw new Error(why)
    const ok = await new Promise<boolean>(resolve => {
      const socket = net.connect(port, '127.0.0.1')
      const done = (value: boolean): void => { socket.destroy(); resolve(value) }
      socket.setTimeout(500, () => done(false))
      socket.once('error', () => done(false))
      socket.once('data', (chunk: Buffer) => done(chunk.toString('utf8').startsWith('INFO ')))
    })
    if (ok) return
    if (Date.now() > deadline) throw new Error(`nats-server did not accept connections on port ${port} within ${timeoutMs} ms`)
    await new Promise(resolve => setTimeout(resolve, 25))
  }
}

const ROUTES_LISTENING = /Listening for route connections on /

/** Resolves once the server logged a line matching `pattern` (lines logged before count too). */
async function waitForLine (pattern: RegExp, output: () => string, timeoutMs: number, exited: () => string | null): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (pattern.test(output())) return
    const why = exited()
    if (why !== null) throw new Error(why)
    if (Date.now() > deadline) throw new Error(`nats-server logged no line matching ${String(pattern)} within ${timeoutMs} ms:\n${output().slice(-4000)}`)
    await new Promise(resolve => setTimeout(resolve, 25))
  }
}

export async function startNatsServer (options: NatsServerOptions = {}): Promise<NatsServer> {
  const storeDir = options.storeDir ?? mkdtempSync(join(tmpdir(), 'beacon-nats-'))
  const ownsStore = options.storeDir === undefined
  let port = options.port ?? await freePort()
  let child: ChildProcess | null = null
  let exitedWith: string | null = null
  let exited: Promise<void> = Promise.resolve()
  let log = ''
  let configFile: string | null = null
  if (options.config !== undefined) {
    configFile = `${storeDir}.conf`
    writeFileSync(configFile, options.config.replace(/^(\s*)store_dir:.*$/m, `$1store_dir: ${JSON.stringify(storeDir)}`))
  }
  const clustered = (options.args ?? []).includes('--cluster') || (options.config !== undefined && /\ncluster\s*\{/.test(options.config))

  const launch = async (): Promise<void> => {
    exitedWith = null
    const storeArgs = configFile === null ? ['-js', '-sd', storeDir] : ['-c', configFile]
    const proc = spawn(options.bin ?? natsServerBin(), [...storeArgs, '-p', String(port), '-a', '127.0.0.1', ...(options.args ?? [])], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: options.env === undefined ? process.env : { PATH: process.env.PATH ?? '', ...options.env },
    })
    child = proc
    reapAtExit(proc)
    const append = (chunk: Buffer): void => {
      log += chunk.toString('utf8')
      if (log.length > 65_536) log = log.slice(-65_536)
    }
    proc.stdout!.on('data', append)
    proc.stderr!.on('data', append)
    exited = new Promise(resolve => {
      proc.once('exit', (code, signal) => {
        exitedWith = `nats-server exited (${signal ?? code}):\n${log.slice(-4000)}`
        if (child === proc) child = null
        resolve()
      })
    })
    proc.once('error', error => { exitedWith = `nats-server failed to start: ${error.message}` })
    try {
      await waitForInfo(port, 10_000, () => exitedWith)
      // A cluster member accepts clients before it listens for routes: when its route port was taken
      // meanwhile (a port picked free a moment ago, on a machine others share), it exits right after
      // answering INFO, and its cluster would run one server short (R3 placement then fails).
      if (clustered) await waitForLine(ROUTES_LISTENING, () => log, 10_000, () => exitedWith)
    } catch (error) {
      if (child === proc) proc.kill('SIGKILL')
      throw error
    }
  }

  const end = async (signal: NodeJS.Signals): Promise<void> => {
    const proc = child
    if (proc === null) return
    proc.kill(signal)
    const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000)
    await exited
    clearTimeout(timer)
  }

  // A port picked free a moment ago can be taken in between: try a few before giving up.
  let attempts = options.port === undefined ? 3 : 1
  for (;;) {
    try {
      await launch()
      break
    } catch (error) {
      if (--attempts === 0) throw error
      port = await freePort()
    }
  }

  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    storeDir,
    get running () { return child !== null },
    get pid () { return child?.pid ?? null },
    output: () => log,
    stop: () => end('SIGTERM'),
    kill: () => end('SIGKILL'),
    async restart () {
      await end('SIGTERM')
      await launch()
    },
    async close () {
      await end('SIGTERM')
      if (ownsStore) rmSync(storeDir, { recursive: true, force: true })
      if (configFile !== null) rmSync(configFile, { force: true })
    },
  }
}
