// `beacon export-events`: an account's retained events of [from, to) as NDJSON (docs/event-log.md),
// streamed from GET /admin/accounts/{account}/events/export into a file (gzip when it ends in .gz) or
// to stdout. Nothing is held whole: the answer is piped through as it arrives.

import { createWriteStream } from 'node:fs'
import { Readable, Transform, Writable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { createGzip } from 'node:zlib'
import type { ReadableStream as WebReadableStream } from 'node:stream/web'
import { segment, type AdminClient } from './client.js'
import { UsageError } from './errors.js'
import type { Output } from './admin-key.js'

export interface ExportEventsOptions {
  account: string
  from: string
  to: string
  out: string | undefined
}

export async function exportEvents (client: AdminClient, { account, from, to, out }: ExportEventsOptions, output: Output): Promise<void> {
  for (const [name, value] of [['from', from], ['to', to]] as const) {
    if (!/^\d{4}-\d{2}-\d{2}/.test(value) || Number.isNaN(Date.parse(value))) throw new UsageError(`export-events: --${name} must be an ISO-8601 time, e.g. 2026-01-31 or 2026-01-31T12:00:00Z`)
  }
  const query = new URLSearchParams({ from: new Date(from).toISOString(), to: new Date(to).toISOString() })
  const body = await client.stream(`/admin/accounts/${segment(account)}/events/export?${query.toString()}`)
  let lines = 0
  const count = new Transform({
    transform (chunk: Buffer, _encoding, done) {
      for (let at = chunk.indexOf(10); at !== -1; at = chunk.indexOf(10, at + 1)) lines++
      done(null, chunk)
    },
  })
  const source = Readable.fromWeb(body as WebReadableStream<Uint8Array>)
  if (out === undefined) {
    await pipeline(source, count, new Writable({
      write (chunk: Buffer, _encoding, done) {
        output.out(chunk.toString('utf8'))
        done()
      },
    }))
    return
  }
  const file = createWriteStream(out, { mode: 0o600 })
  if (out.endsWith('.gz')) await pipeline(source, count, createGzip(), file)
  else await pipeline(source, count, file)
  output.err(`exported ${lines} events of ${account} to ${out}\n`)
}
