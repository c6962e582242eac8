// Seal every stored secret that is not sealed with the key that seals now: plain values written by a
// release before encryption at rest, and values sealed with an older key (a rotation). Run at start
// and by `beacon secrets rotate`, in one synchronous transaction per database.

import type { Key, Store } from './store.js'
import type { IdentitySecrets } from '../auth/identity.js'

type SecretMap = (secret: string) => string

/**
 * The configuration rows (key [account, kind, …]) that hold secrets, by kind: each maps its secrets
 * through `map` into a copy. The catalogs hand theirs down (CONFIG_SECRET_ROWS in src/catalog/catalogs.ts):
 * the store knows sealing, not which fields of a configuration are secrets.
 */
export type SecretRows = ReadonlyMap<string, (value: unknown, map: SecretMap) => unknown>

/** Re-seal what needs it; returns how many rows (configuration and accounts) were written. */
export function sealStoredSecrets (store: Store, secretRows: SecretRows): number {
  const box = store.secrets
  const reseal = (secret: string): string => box.isCurrent(secret) ? secret : box.seal(box.open(secret))
  // Accounts keep their identity secrets (verified identity).
  const accounts: { key: Key, value: unknown }[] = []
  for (const { key, value } of store.accounts.getRange()) {
    const secrets = (value as { identitySecrets?: IdentitySecrets }).identitySecrets
    if (secrets === undefined || (box.isCurrent(secrets.current) && (secrets.previous === null || box.isCurrent(secrets.previous)))) continue
    const identitySecrets = { ...secrets, current: reseal(secrets.current), previous: secrets.previous === null ? null : reseal(secrets.previous) }
    accounts.push({ key: key as Key, value: { ...(value as object), identitySecrets } })
  }
  if (accounts.length > 0) store.accounts.transactionSync(() => { for (const { key, value } of accounts) store.accounts.putSync(key, value) })
  const rows: { key: Key, value: unknown }[] = []
  for (const { key, value } of store.config.getRange()) {
    const mapRow = secretRows.get((key as unknown[])[1] as string)
    if (mapRow === undefined) continue
    let stale = false
    mapRow(value, secret => {
      if (!box.isCurrent(secret)) stale = true
      return secret
    })
    if (stale) rows.push({ key: key as Key, value: mapRow(value, secret => box.seal(box.open(secret))) })
  }
  if (rows.length > 0) store.config.transactionSync(() => { for (const { key, value } of rows) store.config.putSync(key, value) })
  return accounts.length + rows.length
}
