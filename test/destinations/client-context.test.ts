// The client IP and user agent of the request that brought an event reach the destinations that match
// on them (meta-capi user_data.client_ip_address / client_user_agent, tiktok-events user.ip /
// user_agent): read from the request, X-Forwarded-For believed only from BEACON_TRUSTED_PROXIES, an
// event's own clientIp / userAgent fields kept (a site's backend sending for the browser).

import { expect } from 'chai'
import { createTenant, post, tempDir, visitorId, type Tenant } from '../helpers/beacon.js'
import { startInProcess, type InProcess } from '../helpers/in-process.js'
import { until } from '../helpers/until.js'
import { putAll } from './setup.js'
import { MetaCapiDouble } from './doubles/meta-capi-double.js'
import { TiktokDouble } from './doubles/tiktok-double.js'

const UA = 'Mozilla/5.0 (X11; Linux x86_64) Chrome/131.0 Safari/537.36'

for (const trusted of [false, true]) {
  describe(`client IP and user agent on events (${trusted ? 'behind a trusted proxy' : 'no trusted proxy'})`, () => {
    let beacon: InProcess
    let tenant: Tenant
    let meta: MetaCapiDouble
    let tiktok: TiktokDouble

    beforeEach(async () => {
      beacon = await startInProcess(tempDir(), trusted ? { BEACON_TRUSTED_PROXIES: '127.0.0.1, ::1' } : {})
      tenant = await createTenant(beacon.url)
      meta = await new MetaCapiDouble(() => beacon.clock.nowMs()).start()
      tiktok = await new TiktokDouble().start()
      await putAll(beacon.url, tenant.account, { 'destinations/meta': meta.destination(), 'destinations/tiktok': tiktok.destination() })
    })
    afterEach(async () => {
      await beacon.close()
      await meta.close()
      await tiktok.close()
    })

    const purchase = async (orderId: string, headers: Record<string, string>, fields: Record<string, unknown> = {}): Promise<void> => {
      const res = await post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: visitorId(), platform: 'web', event: 'purchase', orderId, orderTotal: 5, currency: 'eur', path: '/done', ...fields }, { headers })
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
    }
    const sent = async (orderId: string): Promise<{ meta: Record<string, unknown>, tiktok: Record<string, unknown> }> => {
      await until(`${orderId} at both`, () => meta.events.some(e => e.custom_data?.order_id === orderId) && tiktok.events.some(e => e.properties?.order_id === orderId))
      return {
        meta: meta.events.find(e => e.custom_data?.order_id === orderId)!.user_data as Record<string, unknown>,
        tiktok: tiktok.events.find(e => e.properties?.order_id === orderId)!.user as Record<string, unknown>,
      }
    }

    it('stamps the request\'s user agent and client address', async () => {
      // A client's own X-Forwarded-For: believed only when the peer (the loopback here) is a trusted proxy.
      await purchase('o-1', { 'user-agent': UA, 'x-forwarded-for': '198.51.100.9, 203.0.113.7' })
      const { meta: m, tiktok: t } = await sent('o-1')
      const ip = trusted ? '203.0.113.7' : '127.0.0.1'
      expect(m).to.include({ client_ip_address: ip, client_user_agent: UA })
      expect(t).to.include({ ip, user_agent: UA })
    })

    it('keeps the event\'s own clientIp and userAgent', async () => {
      await purchase('o-2', { 'user-agent': UA, 'x-forwarded-for': '203.0.113.7' }, { clientIp: '192.0.2.44', userAgent: 'Shop backend for Safari' })
      const { meta: m, tiktok: t } = await sent('o-2')
      expect(m).to.include({ client_ip_address: '192.0.2.44', client_user_agent: 'Shop backend for Safari' })
      expect(t).to.include({ ip: '192.0.2.44', user_agent: 'Shop backend for Safari' })
    })
  })
}
