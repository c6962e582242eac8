import { expect } from 'chai'
import { discardBeacon, startBeacon, type BeaconProcess } from '../helpers/beacon.js'
import { readiness } from '../../src/ops/health.js'

describe('GET /healthz and GET /readyz', () => {
  let beacon: BeaconProcess

  before(async () => { beacon = await startBeacon() })
  after(() => discardBeacon(beacon))

  it('/healthz answers 200 {status: "ok"} without a key', async () => {
    const res = await fetch(beacon.url + '/healthz')
    expect(res.status).to.equal(200)
    expect(await res.json()).to.deep.equal({ status: 'ok' })
  })

  it('/readyz answers 200 ready with each check, NATS not configured', async () => {
    const res = await fetch(beacon.url + '/readyz')
    expect(res.status).to.equal(200)
    const body = await res.json() as { status: string, reason?: string, checks: { name: string, ok: boolean }[] }
    expect(body.status).to.equal('ready')
    expect(body.reason).to.equal(undefined)
    expect(body.checks.map(c => [c.name, c.ok])).to.deep.equal([['lmdb', true], ['nats', true], ['draining', true]])
  })
})

describe('readiness', () => {
  const healthy = { lmdbOpen: () => true, draining: () => false, nats: null }

  it('is ready when LMDB is open, NATS (if configured) connected and the server not draining', () => {
    expect(readiness(healthy).status).to.equal(200)
    expect(readiness({ ...healthy, nats: { connected: () => true } }).status).to.equal(200)
  })

  it('in cluster mode, adds a cluster check: 503 with the node\'s reason until it joined and every partition has an owner', () => {
    const waiting = readiness({ ...healthy, nats: { connected: () => true }, cluster: { unready: () => '3 of 64 partitions have no owner yet.' } })
    expect(waiting.status).to.equal(503)
    expect(waiting.body).to.include({ status: 'not_ready', reason: '3 of 64 partitions have no owner yet.' })
    const ready = readiness({ ...healthy, nats: { connected: () => true }, cluster: { unready: () => null } })
    expect(ready.status).to.equal(200)
    expect(ready.body.checks.map(c => [c.name, c.ok])).to.deep.equal([['lmdb', true], ['nats', true], ['cluster', true], ['draining', true]])
  })

  it('answers 503 with the reason when LMDB is closed', () => {
    const { status, body } = readiness({ ...healthy, lmdbOpen: () => false })
    expect(status).to.equal(503)
    expect(body).to.include({ status: 'not_ready', reason: 'LMDB is closed.' })
  })

  it('answers 503 with the reason when NATS is configured but not connected', () => {
    const { status, body } = readiness({ ...healthy, nats: { connected: () => false } })
    expect(status).to.equal(503)
    expect(body.reason).to.equal('Not connected to NATS.')
    expect(body.checks.find(c => c.name === 'nats')!.ok).to.equal(false)
  })

  it('answers 503 while draining', () => {
    const { status, body } = readiness({ ...healthy, draining: () => true })
    expect(status).to.equal(503)
    expect(body.reason).to.equal('The server is shutting down.')
  })
})
