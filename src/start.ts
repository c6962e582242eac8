// Starting Beacon as a process: read the configuration, start it, stop gracefully on SIGTERM/SIGINT.
// `node dist/src/main.js`, `npm start` and `beacon start` all run this.

import { mkdirSync } from 'node:fs'
import { describeNatsAuth, loadConfig, redactUrl, ConfigError, type Config } from './config.js'
import { markAdminKeyShown, resolveAdminKey } from './admin-key.js'
import { startBeacon } from './app.js'
import { log } from './log.js'
import { DataFolderLockedError } from './store/data-lock.js'
import { SecretsKeyError } from './auth/secret-keys.js'
import { loadUws, uwsBuild, UwsUnavailableError } from './http/uws.js'

/** Start Beacon as this process's job; a failure to start is one line on stderr (and logged), exit code 1. */
export function runServer (): void {
  start().catch((error: unknown) => {
    if (error instanceof DataFolderLockedError || error instanceof SecretsKeyError || error instanceof UwsUnavailableError) {
      process.stderr.write(`beacon: ${error.message}\n`)
      process.exit(1)
    }
    log.fatal({ err: error }, 'beacon failed to start')
    process.stderr.write(`beacon: failed to start: ${startFailure(error)}\n`)
    process.exit(1)
  })
}

/** What went wrong, on one line, with any credentials of a URL taken out. */
export function startFailure (error: unknown): string {
  const text = error instanceof Error ? error.message : String(error)
  return redactUrl(text).replace(/\s*\n\s*/g, ' ')
}

export async function start (): Promise<void> {
  let config: Config
  try {
    config = loadConfig()
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error
    process.stderr.write(`beacon: ${error.message}\n`)
    process.exit(1)
  }
  // The HTTP server's native binding first: on a Node it has no binary for, Beacon stops here, before
  // it opens anything, with one line saying so (src/http/uws.ts).
  loadUws()
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 })
  const admin = resolveAdminKey(config.dataDir, config.adminKey)
  const beacon = await startBeacon({ config, adminKey: admin.key })
  log.info({ host: config.host, port: beacon.port, dataDir: config.dataDir, durability: config.durability, node: process.version, uws: describeUws(), settings: settingsOf(config) }, 'beacon started')
  if (admin.unshown) {
    // Printed once, by the first start that listens; it stays in the file for later starts.
    process.stdout.write(`\nGenerated an admin key (kept in ${admin.file}):\n\n  ${admin.key}\n\n` +
      'Use it as "Authorization: Bearer <key>" on /admin/*, e.g.\n' +
      `  curl -X POST localhost:${beacon.port}/admin/accounts -H 'Authorization: Bearer ${admin.key}' ` +
      '-H \'Content-Type: application/json\' -d \'{"name":"My site"}\'\n\n')
    markAdminKeyShown(config.dataDir)
  }

  const stop = (signal: string): void => {
    log.info({ signal }, 'beacon stopping')
    beacon.stop().then(() => {
      log.info('beacon stopped')
      process.exit(0)
    }, (error: unknown) => {
      log.error({ err: error }, 'beacon failed to stop cleanly')
      process.exit(1)
    })
  }
  process.once('SIGTERM', () => stop('SIGTERM'))
  process.once('SIGINT', () => stop('SIGINT'))
}

/** The uWebSockets.js build in use, e.g. "@btc-vision/uwebsockets.js 20.57.0". */
function describeUws (): string | null {
  const build = uwsBuild()
  return build === null ? null : `${build.package} ${build.version}`
}

/** The settings as they may be logged: no admin key, no metrics token, no credentials in the NATS URL. */
export function settingsOf (config: Config): Record<string, unknown> {
  const { adminKey, natsUrl, natsAuth, secretsKey, metricsToken, host: _host, port: _port, dataDir: _dataDir, durability: _durability, ...rest } = config
  return {
    ...rest,
    adminKeyFrom: adminKey === null ? 'admin.key' : 'BEACON_ADMIN_KEY',
    secretsKeyFrom: secretsKey === null ? 'secrets.key' : 'BEACON_SECRETS_KEY',
    metricsToken: metricsToken !== null,
    nats: natsUrl === null ? null : redactUrl(natsUrl),
    natsAccess: natsUrl === null ? null : describeNatsAuth(natsAuth),
  }
}
