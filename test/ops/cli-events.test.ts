// `beacon export-events` (the built CLI, run as a user would) against an in-process Beacon: the
// account's retained events of a range, to a gzip file or to stdout, and its refusals.

import { expect } from 'chai'
import { readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { gunzipSync } from 'node:zlib'
import { beacon } from '../helpers/cli.js'
import { ADMIN_KEY, createTenant, post, removeDir, tempDir, visitorId, type Tenant } from '../helpers/beacon.js'
import { startInProcess, type InProcess } from '../helpers/in-process.js'
import { TEST_START_MS } from '../helpers/clock.js'

describe('beacon export-events', () => {
  let server: InProcess
  let tenant: Tenant
  let dir: string
  const iso = (ms: number): string => new Date(ms).toISOString()
  before(async () => {
    server = await startInProcess()
    tenant = await createTenant(server.url)
    dir = tempDir('beacon-export-')
    for (let i = 0; i < 6; i++) {
      const res = await post(server.url, '/campaigns/query', { account: tenant.account, visitorId: visitorId(), platform: 'web', event: 'pageView', path: `/${i}` })
      expect(res.status).to.equal(200)
      server.clock.advance(60_000)
    }
  })
  after(async () => {
    await server.close()
    removeDir(dir)
  })
  const run = (args: string[]) => beacon(['export-events', '--url', server.url, '--admin-key', ADMIN_KEY, '--account', tenant.account, ...args])

  it('writes the range\'s events, oldest first, one JSON object a line, gzipped for a .gz file (mode 0600)', async () => {
    const out = join(dir, 'events.ndjson.gz')
    const done = await run(['--from', iso(TEST_START_MS + 60_000), '--to', iso(TEST_START_MS + 4 * 60_000), '--out', out])
    expect(done.code, done.stderr).to.equal(0)
    expect(done.stderr).to.include('exported 3 events')
    expect(statSync(out).mode & 0o777).to.equal(0o600)
    const lines = gunzipSync(readFileSync(out)).toString('utf8').trim().split('\n').map(line => JSON.parse(line) as { kind: string, fields: { path: string } })
    expect(lines.map(e => e.fields.path)).to.deep.equal(['/1', '/2', '/3'])
    expect(lines.every(e => e.kind === 'pageView')).to.equal(true)
  })

  it('writes to stdout without --out', async () => {
    const done = await run(['--from', '2026-01-01', '--to', '2027-01-01'])
    expect(done.code, done.stderr).to.equal(0)
    expect(done.stdout.trim().split('\n').map(line => (JSON.parse(line) as { fields: { path: string } }).fields.path)).to.deep.equal(['/0', '/1', '/2', '/3', '/4', '/5'])
  })

  it('refuses a bad time (exit 2) and an unknown account (exit 1, the server\'s code)', async () => {
    const bad = await run(['--from', 'last week', '--to', '2027-01-01'])
    expect(bad.code).to.equal(2)
    expect(bad.stderr).to.include('--from must be an ISO-8601 time')
    const missing = await beacon(['export-events', '--url', server.url, '--admin-key', ADMIN_KEY, '--account', tenant.account, '--from', '2026-01-01'])
    expect(missing.code).to.equal(2)
    expect(missing.stderr).to.include('--to is required')
    const unknown = await beacon(['export-events', '--url', server.url, '--admin-key', ADMIN_KEY, '--account', '6f1c2d4e-5a6b-4c7d-8e9f-0a1b2c3d4e5f', '--from', '2026-01-01', '--to', '2027-01-01'])
    expect(unknown.code).to.equal(1)
    expect(unknown.stderr).to.include('account_not_found')
  })
})
