// Bytes per event of the retained log on disk (docs/event-log.md, "Sizing"): 200,000 typical events (a
// pageView or productView with platform, path and referrer, a quarter with a profile id), 5 accounts
// interleaved, appended through the log's own append into a fresh data folder; the size is the log's
// B-tree pages (what BEACON_EVENT_LOG_MAX_BYTES compares), divided by the events. One row per mix of the
// segments the visitors are in when their events are applied (kept on each row since issue 30's
// breakdown by segment): none (a row as before), and typical names.
//
//   node --import tsx bench/event-log-size.ts          # BENCH_EVENTS=200000

import { randomUUID } from 'node:crypto'
import { loadavg } from 'node:os'
import { Store } from '../src/store/store.js'
import { EventLog } from '../src/store/event-log.js'
import { removeDir, tempDir } from '../test/helpers/beacon.js'

const EVENTS = Number(process.env.BENCH_EVENTS ?? 200_000)
const ACCOUNTS = Array.from({ length: 5 }, () => randomUUID())
const VISITORS = Array.from({ length: 20_000 }, () => randomUUID())
const START_MS = Date.parse('2026-11-20T00:00:00Z')
const SEGMENTS = ['returning', 'cart-abandoners', 'high-value', 'newsletter', 'mobile-first']

const MIXES: Array<[string, (i: number) => readonly string[]]> = [
  ['no segment (a row as before)', () => []],
  ['1 segment on every event', i => [SEGMENTS[i % 5]!]],
  ['half the events in 2 segments, half in none', i => i % 2 === 0 ? [SEGMENTS[i % 5]!, SEGMENTS[(i + 1) % 5]!] : []],
  ['3 segments on every event', i => [SEGMENTS[i % 5]!, SEGMENTS[(i + 1) % 5]!, SEGMENTS[(i + 2) % 5]!]],
]

async function measure (segmentsOf: (i: number) => readonly string[]): Promise<number> {
  const dir = tempDir('beacon-bench-log-size-')
  const store = new Store({ path: dir, durability: 'committed' })
  const log = new EventLog(store, { retentionMs: 30 * 86_400_000, sizeMaxBytes: 0 })
  let seed = 7
  const next = (): number => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed }
  for (let from = 0; from < EVENTS; from += 1000) {
    store.events.transactionSync(() => {
      for (let i = from; i < Math.min(EVENTS, from + 1000); i++) {
        const v = next() % VISITORS.length
        const kind = next() % 2 === 0 ? 'pageView' : 'productView'
        const event: Record<string, unknown> = { event: kind, platform: v % 3 === 0 ? 'ios' : 'web', path: `/p/${next() % 500}`, referrer: `https://www.example.com/search?q=${next() % 1000}` }
        if (kind === 'productView') event.sku = `sku-${next() % 2000}`
        log.append(ACCOUNTS[i % ACCOUNTS.length]!, VISITORS[v]!, v % 4 === 0 ? `person-${v}@example.com` : null, event, START_MS + i * 10, segmentsOf(i))
      }
    })
  }
  await store.events.committed
  const bytes = log.sizeBytes() / log.count()
  await store.close()
  removeDir(dir)
  return bytes
}

async function main (): Promise<void> {
  console.log(`# event log size: ${EVENTS.toLocaleString('en-US')} events, ${ACCOUNTS.length} accounts interleaved`)
  console.log(`load average before: ${loadavg().map(n => n.toFixed(2)).join(' ')}`)
  console.log('| segments on the rows | bytes per event |\n| --- | ---: |')
  for (const [name, segmentsOf] of MIXES) console.log(`| ${name} | ${(await measure(segmentsOf)).toFixed(0)} |`)
  console.log(`load average after: ${loadavg().map(n => n.toFixed(2)).join(' ')}`)
}

await main()
