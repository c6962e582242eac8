#!/usr/bin/env node
// Entry point: read the configuration, start Beacon, stop gracefully on SIGTERM/SIGINT.

import { mkdirSync } from 'node:fs'
import { loadConfig, ConfigError, type Config } from './config.js'
import { resolveAdminKey } from './admin-key.js'
import { startBeacon } from './app.js'
import { log } from './log.js'

export async function main (): Promise<void> {
  let config: Config
  try {
    config = loadConfig()
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error
    process.stderr.write(`beacon: ${error.message}\n`)
    process.exit(1)
  }
  mkdirSync(config.dataDir, { recursive: true })
  const admin = resolveAdminKey(config.dataDir, config.adminKey)
  if (admin.generated) {
    // Printed once, on the start that created it; it stays in the file for later starts.
    process.stdout.write(`\nGenerated an admin key (kept in ${admin.file}):\n\n  ${admin.key}\n\n` +
      `Use it as "Authorization: Bearer <key>" on /admin/*, e.g.\n` +
      `  curl -X POST localhost:${config.port}/admin/accounts -H 'Authorization: Bearer ${admin.key}' ` +
      `-H 'Content-Type: application/json' -d '{"name":"My site"}'\n\n`)
  }
  const beacon = await startBeacon({ config, adminKey: admin.key })
  log.info({ host: config.host, port: beacon.port, dataDir: config.dataDir, durability: config.durability }, 'beacon started')

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

main().catch((error: unknown) => {
  log.fatal({ err: error }, 'beacon failed to start')
  process.exit(1)
})
