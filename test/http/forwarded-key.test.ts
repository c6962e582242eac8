// The internal key a forwarding node gives a keyless public write (cluster mode; src/http/idempotency-key.ts,
// FORWARDED_KEY_PREFIX): claimed only when the client sent no key, never reachable by a client's key,
// recorded for 5 minutes rather than 24 hours, and its replays not marked Idempotent-Replayed.

import { expect } from 'chai'
import { Store } from '../../src/store/store.js'
import { ApiError } from '../../src/errors.js'
import { answerOf, claimOf, REPLAYED_HEADER } from '../../src/http/idempotency-key.js'
import { FORWARDED_KEY_PREFIX, IDEMPOTENCY_FORWARDED_RETENTION_MS, IDEMPOTENCY_RETENTION_MS, IdempotencyRecords } from '../../src/store/idempotency.js'
import { recall, remember } from '../../actors/idempotent.js'
import type { Request } from '../../src/http/server.js'
import { removeDir, tempDir } from '../helpers/beacon.js'

const request = (idempotencyKey: string, forwardedKey: string): Request => ({
  method: 'post', url: '/visitors/attributes', params: [], authorization: '', query: '', origin: '', cookie: '', host: '', ifNoneMatch: '',
  forwardedProto: '', forwardedFor: '', userAgent: '', contentType: 'application/json', idempotencyKey, forwardedKey, remoteAddress: '127.0.0.1', body: { account: 'a', attributes: { x: 1 } },
})

describe('The internal key of a forwarded keyless write (src/http/idempotency-key.ts)', () => {
  const forwarded = FORWARDED_KEY_PREFIX + 'Vw2kXq1NUID7'

  it('is claimed only without a client key; a client key is claimed as before', () => {
    expect(claimOf(request('', ''), '/visitors/attributes')).to.equal(undefined)
    const internal = claimOf(request('', forwarded), '/visitors/attributes')!
    expect([internal.key, internal.forwarded, internal.replayed]).to.deep.equal([forwarded, true, false])
    const client = claimOf(request('client-key', forwarded), '/visitors/attributes')!
    expect([client.key, client.forwarded ?? false]).to.deep.equal(['client-key', false])
    expect(client.fingerprint).to.equal(internal.fingerprint)
  })

  it('cannot be sent by a client: a key with the prefix is refused', () => {
    let error: unknown
    try {
      claimOf(request(forwarded, ''), '/visitors/attributes')
    } catch (caught) {
      error = caught
    }
    expect(error).to.be.instanceOf(ApiError)
    expect((error as ApiError).items[0]!.code).to.equal('invalid_idempotency_key')
  })

  it('marks a replay only for a client key', () => {
    const internal = { ...claimOf(request('', forwarded), '/visitors/attributes')!, replayed: true }
    const client = { ...claimOf(request('client-key', ''), '/visitors/attributes')!, replayed: true }
    expect(answerOf({ status: 200, body: {} }, internal).headers).to.equal(undefined)
    expect(answerOf({ status: 200, body: {} }, client).headers?.[REPLAYED_HEADER]).to.equal('true')
    expect(answerOf({ status: 200, body: {} }, { ...client, replayed: false }).headers).to.equal(undefined)
  })

  it('is recorded for the forwarder\'s retries only (5 minutes), and answers a retry with it', async () => {
    const dir = tempDir('beacon-fwdkey-')
    const store = new Store({ path: dir, durability: 'committed' })
    try {
      const records = new IdempotencyRecords(store)
      const nowMs = 1_000_000
      const internal = claimOf(request('', forwarded), '/visitors/attributes')!
      const client = claimOf(request('client-key', ''), '/visitors/attributes')!
      expect(remember(records, 'a', 'v', 'visitor', internal, undefined, nowMs).record.x).to.equal(nowMs + IDEMPOTENCY_FORWARDED_RETENTION_MS)
      expect(remember(records, 'a', 'v', 'visitor', client, undefined, nowMs).record.x).to.equal(nowMs + IDEMPOTENCY_RETENTION_MS)
      const retry = claimOf(request('', forwarded), '/visitors/attributes')!
      expect(recall(records, 'a', 'v', 'visitor', retry, nowMs + IDEMPOTENCY_FORWARDED_RETENTION_MS - 1)).to.not.equal(null)
      expect(retry.replayed).to.equal(true)
      expect(recall(records, 'a', 'v', 'visitor', claimOf(request('', forwarded), '/visitors/attributes')!, nowMs + IDEMPOTENCY_FORWARDED_RETENTION_MS)).to.equal(null)
      await store.root.committed
    } finally {
      await store.close()
      removeDir(dir)
    }
  })
})
