// A failed assertion is a bug, met at a module boundary: the request that meets it is answered 500
// `internal`, the log says what the check saw (its context), and the process goes on serving. Met here
// for real: a report bucket whose visitor sketch is not one Beacon wrote (a short register array) is
// put in the data folder, and a real Beacon process reads it back.

import { expect } from 'chai'
import { HLL_REGISTERS } from '../../src/reports/hll.js'
import { admin, createTenant, removeDir, startBeacon, tempDir } from '../helpers/beacon.js'
import { startInProcess } from '../helpers/in-process.js'
import { until } from '../helpers/until.js'
import { expectError } from '../helpers/errors.js'

interface Line { msg: string, [field: string]: unknown }

const HOUR_MS = 3_600_000

describe('a failed assertion inside a request', () => {
  it('is logged with its context, answered 500 internal, and the server serves the next request', async () => {
    const dataDir = tempDir()
    const prepared = await startInProcess(dataDir)
    const tenant = await createTenant(prepared.url)
    const startMs = Date.UTC(2026, 0, 5, 12)
    await prepared.beacon.store.reports.put([tenant.account, 'hour', startMs], {
      events: [], visitors: new Uint8Array(10), campaigns: [], segments: [], deliveries: [0, 0, 0], latency: null,
    })
    await prepared.beacon.stop()

    const beacon = await startBeacon({ dataDir })
    try {
      const range = (fromMs: number): string => `/admin/accounts/${tenant.account}/reports?granularity=hour` +
        `&from=${new Date(fromMs).toISOString()}&to=${new Date(fromMs + HOUR_MS).toISOString()}`
      const broken = await admin(beacon.url, 'GET', range(startMs))
      expectError(broken, 'internal')
      expect(JSON.stringify(broken.body)).not.to.include('assertion')

      const failed = (): Line | undefined => beacon.output().split('\n').filter(line => line.startsWith('{'))
        .map(line => JSON.parse(line) as Line).find(line => line.msg === 'request failed')
      await until('the failure logged', () => failed() !== undefined)
      const err = failed()!.err as { type: string, message: string, context: unknown }
      expect(failed()).to.include({ method: 'get', route: '/admin/accounts/:account/reports' })
      expect(err.type).to.equal('AssertionError')
      expect(err.message).to.include('HyperLogLog')
      expect(err.context).to.deep.equal({ length: 10, expected: HLL_REGISTERS })

      // The next request, and the next hour of the same report, are served as usual.
      const next = await admin(beacon.url, 'GET', range(startMs + HOUR_MS))
      expect(next.status).to.equal(200)
      expect(next.body.rows[0].visitors).to.equal(0)
      expect((await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}`)).status).to.equal(200)
    } finally {
      await beacon.stop()
      removeDir(dataDir)
    }
  })
})
