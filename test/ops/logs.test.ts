import { expect } from 'chai'
import { startNatsServer } from '../helpers/nats-server.js'
import { until } from '../helpers/until.js'
import { ADMIN_KEY, admin, createTenant, post, removeDir, startBeacon, tokenSecret, visitorId, type BeaconProcess } from '../helpers/beacon.js'

interface Line { msg: string, [field: string]: unknown }

function lines (output: string): Line[] {
  return output.split('\n').filter(line => line.startsWith('{')).map(line => JSON.parse(line) as Line)
}

/** The lines with this message, once the process has written `count` of them (pino writes asynchronously). */
async function linesWith (beacon: BeaconProcess, msg: string, count = 1): Promise<Line[]> {
  const found = (): Line[] => lines(beacon.output()).filter(line => line.msg === msg)
  await until(`${count} "${msg}" log lines`, () => found().length >= count, 3000, 20)
  return found()
}

describe('logs', () => {
  it('are JSON lines; start says the settings without the admin key or NATS password, stop says it stopped', async () => {
    const nats = await startNatsServer({ args: ['--user', 'beacon', '--pass', 'nats-password-1'] })
    const beacon = await startBeacon({ env: { BEACON_NATS_URL: `nats://beacon:nats-password-1@127.0.0.1:${nats.port}` } })
    try {
      const started = lines(beacon.output()).find(line => line.msg === 'beacon started')!
      expect(started).to.include({ service: 'beacon', port: beacon.port })
      expect(started.settings).to.include({ metrics: true, requestLogSample: 0, nats: `nats://[redacted]@127.0.0.1:${nats.port}`, adminKeyFrom: 'BEACON_ADMIN_KEY' })
      expect(await beacon.stop()).to.equal(0)
      expect(lines(beacon.output()).map(line => line.msg)).to.include.members(['beacon stopping', 'beacon stopped'])
      expect(beacon.output()).not.to.include('nats-password-1')
      expect(beacon.output()).not.to.include(ADMIN_KEY)
    } finally {
      await beacon.kill()
      removeDir(beacon.dataDir)
      await nats.close()
    }
  })

  it('log no request by default (the hot path), but one line per configuration change', async () => {
    const beacon = await startBeacon()
    try {
      const tenant = await createTenant(beacon.url)
      for (let i = 0; i < 5; i++) await post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: visitorId(), platform: 'web', event: 'pageView' })
      const put = await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/campaigns/summer`, { name: 'Summer', status: 'active', priority: 1, trigger: {}, content: {} })
      expect(put.status).to.equal(200)
      // A refused change changes nothing, and logs no change.
      expect((await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/campaigns/bad`, { name: 'Bad' })).status).to.equal(400)
      const changes = await linesWith(beacon, 'configuration changed', 3)
      expect(changes.map(c => `${c.method} ${c.route}`)).to.deep.equal([
        'POST /admin/accounts',
        'POST /admin/accounts/:account/tokens',
        'PUT /admin/accounts/:account/campaigns/:id',
      ])
      expect(changes[2]).to.include({ account: tenant.account, id: 'summer', status: 200 })
      expect(lines(beacon.output()).filter(line => line.msg === 'request')).to.deep.equal([])
      expect(beacon.output()).not.to.include(tokenSecret(tenant.token))
    } finally {
      await beacon.stop()
      removeDir(beacon.dataDir)
    }
  })

  it('with BEACON_REQUEST_LOG_SAMPLE=1, log every request by route pattern, never a secret or an id from the URL or body', async () => {
    const beacon = await startBeacon({ env: { BEACON_REQUEST_LOG_SAMPLE: '1' } })
    try {
      const tenant = await createTenant(beacon.url)
      const secret = tokenSecret(tenant.token)
      const visitor = visitorId()
      expect((await post(beacon.url, '/visitors/attributes', { account: tenant.account, token: tenant.token, visitorId: visitor, attributes: { plan: 'pro' } })).status).to.equal(200)
      expect((await post(beacon.url, '/profiles/attributes', { account: tenant.account, token: tenant.token, profileId: 'ana@example.com', attributes: { plan: 'pro' } })).status).to.equal(200)
      const hook = await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/webhooks/crm`, {
        name: 'CRM', enabled: true, trigger: { kind: 'event', events: ['purchase'] },
        request: { method: 'POST', url: 'https://crm.example.com/in', headers: { 'X-Api-Key': 'header-secret-3' }, auth: { type: 'basic', username: 'u', password: 'basic-password-4' } },
        delivery: { mode: 'async', timeoutMs: 1000, batchSize: 1 },
      })
      expect(hook.status).to.equal(200)
      expect((await admin(beacon.url, 'GET', '/admin/accounts', undefined, 'wrong-key-0123456789')).status).to.equal(401)
      const requests = await linesWith(beacon, 'request', 6)
      expect(requests.map(r => `${r.method} ${r.route} ${r.status}`)).to.include.members([
        'POST /visitors/attributes 200', 'POST /profiles/attributes 200', 'PUT /admin/accounts/:account/webhooks/:id 200', 'GET /admin/accounts 401',
      ])
      for (const request of requests) expect(request.durationMs).to.be.a('number')
      const output = beacon.output()
      for (const secretText of [secret, ADMIN_KEY, 'wrong-key-0123456789', 'header-secret-3', 'basic-password-4', visitor, 'ana@example.com']) {
        expect(output, secretText).not.to.include(secretText)
      }
    } finally {
      await beacon.stop()
      removeDir(beacon.dataDir)
    }
  })
})
