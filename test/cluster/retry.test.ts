import { expect } from 'chai'
import { JetStreamApiError } from '@nats-io/jetstream'
import { isStreamNameInUse, isSubjectOverlap, retryWhileElecting } from '../../src/cluster/retry.js'

describe('cluster: retrying while NATS elects a leader', () => {
  it('retries timeouts and "temporarily unavailable" until the operation succeeds', async () => {
    let calls = 0
    const result = await retryWhileElecting(async () => {
      calls++
      if (calls === 1) throw new Error('timeout')
      if (calls === 2) throw new JetStreamApiError({ code: 503, err_code: 10008, description: 'JetStream system temporarily unavailable' })
      return 'opened'
    })
    expect(result).to.equal('opened')
    expect(calls).to.equal(3)
  })

  it('gives up at once on a real refusal, and after the deadline on a lasting outage', async () => {
    let calls = 0
    const refusal = new JetStreamApiError({ code: 400, err_code: 10058, description: 'stream name already in use with a different configuration' })
    const first = await retryWhileElecting(async () => { calls++; throw refusal }).catch((error: unknown) => error)
    expect(first).to.equal(refusal)
    expect(calls).to.equal(1)
    const lasting = await retryWhileElecting(async () => { throw new Error('no responders') }, 250).catch((error: unknown) => error)
    expect((lasting as Error).message).to.equal('no responders')
  })

  it('retries the refusals a caller names as transient (an overlap with the stream itself), and no others', async () => {
    const overlap = new JetStreamApiError({ code: 500, err_code: 10065, description: 'subjects overlap with an existing stream' })
    const inUse = new JetStreamApiError({ code: 400, err_code: 10058, description: 'stream name already in use with a different configuration' })
    expect([isSubjectOverlap(overlap), isSubjectOverlap(inUse), isSubjectOverlap(new Error('subjects overlap with an existing stream'))]).to.deep.equal([true, false, false])
    expect([isStreamNameInUse(inUse), isStreamNameInUse(overlap)]).to.deep.equal([true, false])
    let calls = 0
    const result = await retryWhileElecting(async () => {
      calls++
      if (calls === 1) throw overlap
      if (calls === 2) throw inUse
      return 'opened'
    }, 30_000, error => isSubjectOverlap(error) || isStreamNameInUse(error))
    expect(result).to.equal('opened')
    expect(calls).to.equal(3)
    const refused = await retryWhileElecting(async () => { throw overlap }).catch((error: unknown) => error)
    expect(refused).to.equal(overlap)
  })
})
