// An in-process Beacon with a clock the test moves by hand, still driven over real HTTP with a real
// LMDB folder: for behaviour that depends on time passing (windows, expiry, caps).

import { loadConfig } from '../../src/config.js'
import { startBeacon, type Beacon } from '../../src/app.js'
import { ADMIN_KEY, admin, createTenant, removeDir, tempDir, type Tenant } from './beacon.js'
import { startReceiver } from '../webhooks/helpers.js'
import { log } from '../../src/log.js'
import { manualClock, type ManualClock } from './clock.js'
import { until } from './until.js'

// In-process Beacons log through the test runner's stdout: only what goes wrong, unless asked.
if (process.env.BEACON_LOG_LEVEL === undefined) log.level = 'warn'

export interface InProcess {
  beacon: Beacon
  url: string
  clock: ManualClock
  dataDir: string
  close: () => Promise<void>
}

export async function startInProcess (dataDir = tempDir(), env: Record<string, string> = {}, clock: ManualClock = manualClock()): Promise<InProcess> {
  const config = loadConfig({ BEACON_HOST: '127.0.0.1', BEACON_PORT: '0', BEACON_DATA_DIR: dataDir, BEACON_SEGMENT_SWEEP_MS: '3600000', BEACON_WEBHOOK_ALLOW_PRIVATE: 'true', ...env })
  const beacon = await startBeacon({ config, adminKey: ADMIN_KEY, clock })
  return {
    beacon,
    url: `http://127.0.0.1:${beacon.port}`,
    clock,
    dataDir,
    async close () {
      await beacon.stop()
      removeDir(dataDir)
    },
  }
}

/** A fresh in-process Beacon with one tenant for each test of the calling describe block (read the fields inside tests). */
export function freshTenantEach (): { beacon: InProcess, tenant: Tenant } {
  const each = {} as { beacon: InProcess, tenant: Tenant }
  beforeEach(async () => {
    each.beacon = await startInProcess()
    each.tenant = await createTenant(each.beacon.url)
  })
  afterEach(() => each.beacon.close())
  return each
}

/**
 * A real receiver subscribed to every enter and exit of the given segments through an audience
 * webhook: what the outbox carried, as delivered. `changes()` waits until `count` have arrived (and
 * a moment more, so that an extra one would show) and answers them as "enter|exit segment id".
 */
export async function audienceSink (base: string, account: string, segments: string[]): Promise<{ changes: (count: number) => Promise<string[]>, close: () => Promise<void> }> {
  const receiver = await startReceiver()
  const res = await admin(base, 'PUT', `/admin/accounts/${account}/webhooks/audience-sink`, {
    name: 'audience sink', enabled: true,
    trigger: { kind: 'audience', segments, on: ['enter', 'exit'] },
    request: { method: 'POST', url: `${receiver.url}/audience`, payload: '{"change": {{change}}, "segment": {{audience}}, "who": "{{visitorId}}{{profileId}}"}' },
    delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1 },
  })
  if (res.status !== 200) throw new Error(`audience sink: ${JSON.stringify(res.body)}`)
  const seen = (): string[] => receiver.requests.map(r => {
    const body = JSON.parse(r.body) as { change: string, segment: string, who: string }
    return `${body.change} ${body.segment} ${body.who}`
  })
  return {
    async changes (count) {
      // Past 5 s the caller's own assertion says what arrived.
      await until(`${count} audience changes`, () => seen().length >= count, 5000, 10).catch(() => {})
      await new Promise(resolve => setTimeout(resolve, 100))
      return seen()
    },
    close: () => receiver.close(),
  }
}
