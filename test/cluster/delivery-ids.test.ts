// An outbox row resent after a takeover is sent under its first webhook-id: a webhook, 3 nodes, real
// processes and a real HTTP sink (test/helpers/resend-after-takeover.ts says what is checked).

import { describeResendAfterTakeover } from '../helpers/resend-after-takeover.js'
import { startReceiver } from '../webhooks/helpers.js'

describeResendAfterTakeover('Beacon cluster mode: a row resent by a new owner keeps its webhook-id (3 nodes, real processes)', {
  idName: 'webhook-id',
  path: 'webhooks/purchases',
  start: async () => {
    const receiver = await startReceiver()
    return {
      config: {
        name: 'purchases', enabled: true, trigger: { kind: 'event', events: ['purchase'] },
        request: { method: 'POST', url: `${receiver.url}/purchases`, payload: '{"order": {{event.orderId}}, "who": {{visitorId}}}' },
        delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1 },
      },
      arrivals: () => receiver.requests.filter(r => r.url === '/purchases')
        .map(r => ({ order: String((JSON.parse(r.body) as { order: string }).order), id: String(r.headers['webhook-id']), body: r.body })),
      close: () => receiver.close(),
    }
  },
  purchase: { platform: 'web' },
})
