// `beacon import-events <file.ndjson[.gz]> --account <id>`: a bulk import (docs/events.md, "Bulk
// import"). The file is streamed to POST /admin/accounts/{account}/imports as it is read (a .gz one
// decompressed on the way), never held whole; then the job is followed to its end with a progress line
// on stderr (rows, rows/s, ETA). Exit 0 when the import is done (refused rows are listed, not fatal),
// 1 when it failed.

import { createReadStream, statSync } from 'node:fs'
import { createGunzip } from 'node:zlib'
import type { Readable } from 'node:stream'
import { segment, upload, type AdminClient } from './client.js'
import { CliError, UsageError } from './errors.js'
import type { Output } from './admin-key.js'

export interface ImportEventsOptions {
  account: string
  file: string
  deliver: boolean
  /** How often the job is read (tests make it short). */
  pollMs?: number
}

interface ImportAnswer {
  id: string
  state: 'queued' | 'running' | 'done' | 'failed'
  rowsRead: number
  applied: number
  duplicates: number
  refused: number
  refusals: Array<{ line: number, code: string, message: string }>
  error: string | null
}

/** Refusals listed at the end (all are in the job's record, up to its first 100). */
const REFUSALS_SHOWN = 10

export async function importEvents (client: AdminClient, { account, file, deliver, pollMs = 1000 }: ImportEventsOptions, output: Output): Promise<void> {
  let size: number
  try {
    size = statSync(file).size
  } catch {
    throw new UsageError(`import-events: cannot read ${file}`)
  }
  let source: Readable = createReadStream(file)
  if (file.endsWith('.gz')) source = source.pipe(createGunzip())
  let rows = 0
  let sent = 0
  const started = Date.now()
  async function * counted (): AsyncGenerator<Uint8Array> {
    for await (const chunk of source as AsyncIterable<Buffer>) {
      for (let at = chunk.indexOf(10); at !== -1; at = chunk.indexOf(10, at + 1)) rows++
      sent += chunk.byteLength
      output.err(`\ruploading ${file}: ${rows} rows, ${(sent / 1048576).toFixed(1)} MiB${file.endsWith('.gz') ? '' : ` of ${(size / 1048576).toFixed(1)}`}   `)
      yield chunk
    }
  }
  const query = deliver ? '?deliver=true' : ''
  let job = await upload<ImportAnswer>(client, `/admin/accounts/${segment(account)}/imports${query}`, counted(), 'application/x-ndjson')
  output.err(`\nimport ${job.id} queued: ${rows} rows\n`)
  const appliedSince = Date.now()
  while (job.state === 'queued' || job.state === 'running') {
    await new Promise(resolve => setTimeout(resolve, pollMs))
    job = await client.request<ImportAnswer>('GET', `/admin/accounts/${segment(account)}/imports/${segment(job.id)}`)
    output.err(`\r${progress(job.rowsRead, rows, (Date.now() - appliedSince) / 1000)}   `)
  }
  const seconds = (Date.now() - started) / 1000
  output.err(`\n${job.state}: ${job.applied} applied, ${job.duplicates} duplicates, ${job.refused} refused in ${seconds.toFixed(1)} s\n`)
  for (const refusal of job.refusals.slice(0, REFUSALS_SHOWN)) output.err(`  line ${refusal.line}: ${refusal.code}: ${refusal.message}\n`)
  if (job.refused > REFUSALS_SHOWN) output.err(`  (${job.refused - REFUSALS_SHOWN} more: GET /admin/accounts/${account}/imports/${job.id})\n`)
  if (job.state === 'failed') throw new CliError(`import ${job.id} failed: ${job.error ?? 'unknown error'}`)
}

/** "12000 of 50000 rows, 3400 rows/s, ETA 11 s". */
export function progress (done: number, total: number, seconds: number): string {
  const rate = seconds > 0 ? done / seconds : 0
  const eta = rate > 0 ? `ETA ${Math.ceil((total - done) / rate)} s` : 'ETA -'
  return `${done} of ${total} rows, ${Math.round(rate)} rows/s, ${eta}`
}
