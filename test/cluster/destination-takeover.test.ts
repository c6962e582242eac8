// A native destination across a takeover: as for webhooks (delivery-ids.test.ts), the new owner resends
// the last outbox rows of a dead owner's partitions; a meta-capi destination sends each event's event_id
// as the delivery's webhook-id, which a resent row keeps (its first owner's), so Meta, deduplicating on
// event_id, sees each purchase under one event_id only. 3 nodes, real processes, the Meta Conversions
// API contract double (test/helpers/resend-after-takeover.ts says what is checked).

import { MetaCapiDouble } from '../destinations/doubles/meta-capi-double.js'
import { describeResendAfterTakeover } from '../helpers/resend-after-takeover.js'

describeResendAfterTakeover('Beacon cluster mode: a meta-capi destination across a takeover sends each event under one event_id (3 nodes, real processes)', {
  idName: 'event_id',
  path: 'destinations/meta',
  start: async () => {
    const meta = await new MetaCapiDouble().start()
    return {
      config: meta.destination({ timeoutMs: 2000 }),
      arrivals: () => meta.events.map(event => ({ order: String(event.custom_data?.order_id), id: String(event.event_id), body: JSON.stringify(event) })),
      close: () => meta.close(),
    }
  },
  purchase: { platform: 'web', orderTotal: 10, currency: 'eur', path: '/done', userAgent: 'Mozilla/5.0 (test)' },
})
