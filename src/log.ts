// Structured JSON logs (pino): one line per start, stop, configuration change and error.
// Secrets never reach a log line: tokens, the admin key and webhook credentials are redacted by path.

import { pino } from 'pino'
import { LOG_LEVELS } from './config.js'

/** BEACON_LOG_LEVEL as pino takes it; an unknown value is reported by loadConfig, not thrown here. */
function levelOf (raw: string | undefined): string {
  return raw !== undefined && (LOG_LEVELS as readonly string[]).includes(raw) ? raw : 'info'
}

export const log = pino({
  base: { service: 'beacon' },
  level: levelOf(process.env.BEACON_LOG_LEVEL),
  redact: { paths: ['token', 'adminKey', '*.token', '*.adminKey', '*.authorization', '*.password'], censor: '[redacted]' },
})
