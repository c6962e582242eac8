// Seal every stored secret that is not sealed with the key that seals now: plain values written by a
// release before encryption at rest, and values sealed with an older key (a rotation). Run at start
// and by `beacon secrets rotate`, in one synchronous transaction: all or nothing.

import type { Key, Store } from './store.js'
import { mapSecrets, type WebhookConfig } from '../webhooks/index.js'

/** Re-seal what needs it; resolves with how many configuration rows were written. */
export function sealStoredSecrets (store: Store): number {
  const box = store.secrets
  const rows: { key: Key, value: WebhookConfig }[] = []
  for (const { key, value } of store.config.getRange()) {
    if ((key as unknown[])[1] !== 'webhook') continue
    let stale = false
    mapSecrets(value as WebhookConfig, secret => {
      if (!box.isCurrent(secret)) stale = true
      return secret
    })
    if (stale) rows.push({ key: key as Key, value: mapSecrets(value as WebhookConfig, secret => box.seal(box.open(secret))) })
  }
  if (rows.length > 0) store.config.transactionSync(() => { for (const { key, value } of rows) store.config.putSync(key, value) })
  return rows.length
}

/** The configuration as stored: its secrets sealed. */
export function sealWebhook (store: Store, config: WebhookConfig): WebhookConfig {
  return mapSecrets(config, secret => store.secrets.seal(secret))
}

/** The configuration as read back: its secrets opened. */
export function openWebhook (store: Store, config: WebhookConfig): WebhookConfig {
  return mapSecrets(config, secret => store.secrets.open(secret))
}
