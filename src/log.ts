// Structured JSON logs (pino): one line per start, stop, configuration change and error.
// Secrets never reach a log line: tokens, the admin key and webhook credentials are redacted by path.

import { pino } from 'pino'

export const log = pino({
  base: { service: 'beacon' },
  level: process.env.BEACON_LOG_LEVEL || 'info',
  redact: { paths: ['token', 'adminKey', '*.token', '*.adminKey', '*.authorization', '*.password'], censor: '[redacted]' },
})
