// Graceful shutdown under load, on both webhook transports: SIGTERM while hundreds of purchases are in
// flight, then a restart on the same data folder. Every purchase answered 200 must still be on disk
// and must still reach the webhook's receiver: its outbox row was handed to the transport before
// exit, or kept for the next start.

import { expect } from 'chai'
import { admin, createTenant, post, removeDir, startBeacon, tempDir, visitorId, type BeaconProcess } from '../helpers/beacon.js'
import { startNatsServer, type NatsServer } from '../helpers/nats-server.js'
import { startReceiver, waitFor, type Receiver } from '../webhooks/helpers.js'

const ORDERS = 3000

for (const transport of ['embedded', 'JetStream'] as const) {
  describe(`SIGTERM under load, ${transport} transport`, function () {
    this.timeout(120_000)
    let nats: NatsServer | null = null
    let receiver: Receiver
    let beacon: BeaconProcess | null = null
    const dataDir = tempDir()

    before(async () => {
      if (transport === 'JetStream') nats = await startNatsServer()
      receiver = await startReceiver()
    })
    after(async () => {
      await beacon?.kill()
      removeDir(dataDir)
      await receiver.close()
      await nats?.close()
    })

    it('loses no acknowledged write and no outbox row', async () => {
      const env = { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true', ...(nats === null ? {} : { BEACON_NATS_URL: nats.url }) }
      beacon = await startBeacon({ dataDir, env })
      const tenant = await createTenant(beacon.url)
      const hook = await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/webhooks/orders`, {
        name: 'orders', enabled: true, trigger: { kind: 'event', events: ['purchase'] },
        request: { method: 'POST', url: `${receiver.url}/orders`, payload: '{"order": {{event.orderId}}}' },
        delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1 },
      })
      expect(hook.status, JSON.stringify(hook.body)).to.equal(200)

      // 32 clients send purchases back to back; SIGTERM comes once 300 are acknowledged, mid-stream.
      const statuses = new Map<number, number>()
      const visitors: string[] = []
      let next = 0
      let stopping: Promise<number | null> | null = null
      const client = async (): Promise<void> => {
        while (next < ORDERS) {
          const i = next++
          visitors[i] = visitorId()
          const status = await post(beacon!.url, '/campaigns/query', { account: tenant.account, visitorId: visitors[i], platform: 'web', event: 'purchase', orderId: `o-${i}`, orderTotal: 10 })
            .then(r => r.status, () => 0)
          statuses.set(i, status)
          if (status === 0) return // the listener is closed
          if (stopping === null && [...statuses.values()].filter(s => s === 200).length >= 300) stopping = beacon!.stop()
        }
      }
      await Promise.all(Array.from({ length: 32 }, client))
      expect(stopping, 'the stop came before every purchase was sent').not.to.equal(null)
      expect(await stopping).to.equal(0)
      // Every request was answered (200, or 503 once draining) or never accepted (connection refused).
      const odd = [...statuses.values()].filter(s => s !== 200 && s !== 503 && s !== 0)
      expect(odd, 'statuses other than 200, 503 or refused').to.deep.equal([])
      const acknowledged = [...statuses].flatMap(([i, s]) => s === 200 ? [i] : [])
      expect(acknowledged.length).to.be.at.least(300)
      expect(acknowledged.length).to.be.below(ORDERS)
      console.log(`      ${acknowledged.length} purchases acknowledged, ${statuses.size - acknowledged.length} refused or cut by the stop`)

      beacon = await startBeacon({ dataDir, env })
      const orders = (): Set<string> => new Set(receiver.requests.map(r => (JSON.parse(r.body) as { order: string }).order))
      await waitFor(() => {
        const delivered = orders()
        return acknowledged.every(i => delivered.has(`o-${i}`))
      }, 45_000, 'every acknowledged purchase delivered')
      for (const i of acknowledged.slice(0, 100)) {
        const res = await post(beacon.url, '/visitors/query', { account: tenant.account, visitorId: visitors[i], token: tenant.token })
        expect(res.status).to.equal(200)
      }
      const exported = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/visitors/${visitors[acknowledged[0]!]}`)
      expect(exported.status, JSON.stringify(exported.body)).to.equal(200)
      expect(JSON.stringify(exported.body)).to.include('"purchases":1')
    })
  })
}
