// What the destination tests set up alike.

import { expect } from 'chai'
import { admin } from '../helpers/beacon.js'

/** PUTs each body at its path below the account's admin path (`destinations/meta`, `segments/vip`), in order, each answered 200. */
export async function putAll (url: string, account: string, entries: Record<string, unknown>): Promise<void> {
  for (const [path, body] of Object.entries(entries)) {
    const res = await admin(url, 'PUT', `/admin/accounts/${account}/${path}`, body)
    expect(res.status, `PUT ${path}: ${JSON.stringify(res.body)}`).to.equal(200)
  }
}
