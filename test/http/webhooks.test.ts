// Webhooks over HTTP, beyond the contract both transports pass (test/http/webhooks-nats.test.ts):
// configuration refusals, and the embedded transport across a SIGKILL.

import { expect } from 'chai'
import { admin, createTenant, post, removeDir, startBeacon, visitorId } from '../helpers/beacon.js'
import { startInProcess } from '../helpers/in-process.js'
import { startReceiver } from '../webhooks/helpers.js'
import { until } from '../helpers/until.js'

describe('webhook configuration', () => {
  it('refuses an invalid webhook with 400 and the path of each problem, and answers 404 for an unknown one', async () => {
    const beacon = await startInProcess()
    try {
      const tenant = await createTenant(beacon.url)
      const res = await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/webhooks/bad`, { name: '', enabled: true, trigger: { kind: 'event', events: [] }, request: { method: 'PATCH', url: 'ftp://x' }, delivery: { mode: 'async', timeoutMs: 1, batchSize: 0 } })
      expect(res.status).to.equal(400)
      expect(res.body.errors.length).to.be.at.least(3)
      expect((await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/webhooks/nope`)).status).to.equal(404)
    } finally {
      await beacon.close()
    }
  })
})

describe('webhook secrets sent back as [redacted]', () => {
  // issue 27: an editor PUT back what GET showed with only the url changed, and the real secrets went to their server.
  it('keeps them only while the url\'s origin and the proxy are unchanged; a new origin needs them entered again (400 naming each)', async () => {
    const beacon = await startInProcess()
    try {
      const tenant = await createTenant(beacon.url)
      const path = `/admin/accounts/${tenant.account}/webhooks/hook`
      const config = {
        name: 'hook', enabled: true, trigger: { kind: 'event', events: ['purchase'] },
        request: { method: 'POST', url: 'https://hooks.example.com/in', auth: { type: 'bearer', token: 'tok-secret' }, headers: { 'X-Api-Key': 'key-secret', 'X-Source': 'beacon' }, signingSecret: 'whsec_' + Buffer.alloc(32, 7).toString('base64') },
        delivery: { mode: 'async', timeoutMs: 5000, batchSize: 1 },
      }
      const created = await admin(beacon.url, 'PUT', path, config)
      expect(created.status, JSON.stringify(created.body)).to.equal(200)
      const shown = (await admin(beacon.url, 'GET', path)).body
      const { id: _id, ...back } = shown
      expect(JSON.stringify(back)).not.to.match(/tok-secret|key-secret|whsec_/)
      const moved = await admin(beacon.url, 'PUT', path, { ...back, request: { ...back.request, url: 'https://attacker.example.net/in' } })
      expect(moved.status, JSON.stringify(moved.body)).to.equal(400)
      expect(moved.body.errors.map((e: { field: string }) => e.field).sort()).to.deep.equal(['/request/auth/token', '/request/headers/X-Api-Key', '/request/signingSecret'])
      expect(moved.body.errors.every((e: { code: string }) => e.code === 'invalid_field')).to.equal(true)
      const port = await admin(beacon.url, 'PUT', path, { ...back, request: { ...back.request, url: 'https://hooks.example.com:8443/in' } })
      expect(port.status, 'another port is another origin').to.equal(400)
      const proxied = await admin(beacon.url, 'PUT', path, { ...back, delivery: { ...back.delivery, proxy: 'http://proxy.attacker.example.net:3128' } })
      expect(proxied.status, 'a new proxy sees the secrets too').to.equal(400)
      // The same origin (another path): kept.
      expect((await admin(beacon.url, 'PUT', path, { ...back, request: { ...back.request, url: 'https://hooks.example.com/other?x=1' } })).status).to.equal(200)
      // A new origin with the secrets entered again: saved.
      const entered = await admin(beacon.url, 'PUT', path, { ...back, request: { ...config.request, url: 'https://new.example.org/in' } })
      expect(entered.status, JSON.stringify(entered.body)).to.equal(200)
      expect((await admin(beacon.url, 'GET', path)).body.request.url).to.equal('https://new.example.org/in')
    } finally {
      await beacon.close()
    }
  })
})

describe('delivery records', () => {
  it('deletes delivered ones past BEACON_DELIVERY_RETENTION_MS, keeps dead ones and recent ones', async () => {
    const receiver = await startReceiver(request => request.body.includes('o-dead') ? { status: 422 } : { status: 200 })
    const beacon = await startInProcess(undefined, { BEACON_DELIVERY_RETENTION_MS: String(86_400_000) })
    try {
      beacon.clock.advance(Date.now() - beacon.clock.nowMs())
      const tenant = await createTenant(beacon.url)
      await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/webhooks/orders`, {
        name: 'orders', enabled: true, trigger: { kind: 'event', events: ['purchase'] },
        request: { method: 'POST', url: `${receiver.url}/in`, payload: '{"order": {{event.orderId}}}' },
        delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1 },
      })
      const purchase = (orderId: string) => post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: visitorId(), platform: 'web', event: 'purchase', orderId })
      const list = async (status: string): Promise<unknown[]> => (await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/webhooks/orders/deliveries?status=${status}`)).body.deliveries
      await purchase('o-old')
      await purchase('o-dead')
      await until('two attempts', () => receiver.requests.length === 2)
      for (let i = 0; i < 100 && ((await list('delivered')).length < 1 || (await list('dead')).length < 1); i++) await new Promise(resolve => setTimeout(resolve, 20))
      beacon.clock.advance(2 * 86_400_000)
      await purchase('o-new')
      await until('the third', () => receiver.requests.length === 3)
      for (let i = 0; i < 100 && (await list('delivered')).length < 2; i++) await new Promise(resolve => setTimeout(resolve, 20))
      expect(await beacon.beacon.pruneDeliveries()).to.equal(1)
      const delivered = await list('delivered') as { context: { eventFields: { orderId: string } } }[]
      expect(delivered.map(d => d.context.eventFields.orderId)).to.deep.equal(['o-new'])
      expect(await list('dead')).to.have.length(1)
    } finally {
      await beacon.close()
      await receiver.close()
    }
  })
})

describe('webhooks survive a crash', () => {
  it('delivers every one of 5,000 events at least once across a SIGKILL mid-stream, duplicates with the same webhook-id', async function () {
    this.timeout(120_000)
    const receiver = await startReceiver()
    let beacon = await startBeacon({ env: { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' } })
    try {
      const tenant = await createTenant(beacon.url)
      await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/webhooks/orders`, {
        name: 'orders', enabled: true, trigger: { kind: 'event', events: ['purchase'] },
        request: { method: 'POST', url: `${receiver.url}/in`, payload: '{"order": {{event.orderId}}}' },
        delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1 },
      })
      const sent = new Set<string>()
      const send = async (from: number, to: number, url: string): Promise<void> => {
        for (let i = from; i < to; i += 50) {
          const answers = await Promise.all(Array.from({ length: Math.min(50, to - i) }, (_, j) => {
            const orderId = `o-${i + j}`
            return post(url, '/campaigns/query', { account: tenant.account, visitorId: visitorId(), platform: 'web', event: 'purchase', orderId })
              .then(r => { if (r.status === 200) sent.add(orderId) }, () => {})
          }))
          void answers
        }
      }
      await send(0, 2500, beacon.url)
      await beacon.kill()
      beacon = await startBeacon({ dataDir: beacon.dataDir, env: { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' } })
      await send(2500, 5000, beacon.url)
      expect(sent.size).to.equal(5000)
      const seen = (): Set<string> => new Set(receiver.requests.map(r => (JSON.parse(r.body) as { order: string }).order))
      await until('all 5,000 delivered', () => seen().size === 5000, 90_000)
      const ids = new Map<string, Set<string>>()
      for (const r of receiver.requests) {
        const order = (JSON.parse(r.body) as { order: string }).order
        const set = ids.get(order) ?? new Set()
        set.add(String(r.headers['webhook-id']))
        ids.set(order, set)
      }
      for (const [order, set] of ids) expect(set.size, order).to.equal(1)
    } finally {
      await beacon.kill()
      await receiver.close()
      removeDir(beacon.dataDir)
    }
  })
})
