import { expect } from 'chai'
import { admin, createTenant, discardBeacon, post, removeDir, startBeacon, tempDir, visitorId, type BeaconProcess } from '../helpers/beacon.js'

describe('durability', () => {
  it('keeps every acknowledged write across 50 SIGKILLs right after the 200', async function () {
    // 50 process starts: about 60 s alone on 2 cores, 211 s beside faults.test (npm test starts them together).
    this.timeout(400_000)
    const dataDir = tempDir()
    let beacon: BeaconProcess = await startBeacon({ dataDir })
    try {
      const tenant = await createTenant(beacon.url)
      const visitor = visitorId()
      let previous: { round: number, kind: string } | null = null
      for (let round = 0; round < 50; round++) {
        if (previous !== null) await expectRound(beacon.url, tenant, visitor, previous.round, previous.kind)
        // Rotate what is written: visitor attributes, profile segments, a tracked event.
        const kind = ['visitor-attribute', 'profile-segment', 'event'][round % 3]!
        const res = await writeRound(beacon.url, tenant, visitor, round, kind)
        expect(res.status, `round ${round} write`).to.equal(200)
        await beacon.kill()
        beacon = await startBeacon({ dataDir })
        previous = { round, kind }
      }
      await expectRound(beacon.url, tenant, visitor, previous!.round, previous!.kind)
    } finally {
      await beacon.kill()
      removeDir(dataDir)
    }
  })

  it('keeps a token and an account created right before a SIGKILL', async () => {
    const dataDir = tempDir()
    let beacon = await startBeacon({ dataDir })
    try {
      const tenant = await createTenant(beacon.url)
      await beacon.kill()
      beacon = await startBeacon({ dataDir })
      const res = await post(beacon.url, '/profiles/query', { account: tenant.account, profileId: 'p', token: tenant.token })
      expect(res.status).to.equal(200)
    } finally {
      await beacon.kill()
      removeDir(dataDir)
    }
  })
})

describe('one writer per key', () => {
  let beacon: BeaconProcess
  before(async () => { beacon = await startBeacon() })
  after(() => discardBeacon(beacon))

  it('loses no update among 1,000 concurrent updates of distinct attributes on one visitor', async () => {
    const tenant = await createTenant(beacon.url)
    const id = visitorId()
    const answers = await Promise.all(Array.from({ length: 1000 }, (_, i) =>
      post(beacon.url, '/visitors/attributes', { account: tenant.account, visitorId: id, token: tenant.token, attributes: { [`a${i}`]: String(i) } })))
    expect(answers.filter(r => r.status !== 200).map(r => r.body)).to.deep.equal([])
    const q = await post(beacon.url, '/visitors/query', { account: tenant.account, visitorId: id, token: tenant.token })
    expect(Object.keys(q.body.attributes)).to.have.length(1000)
    for (let i = 0; i < 1000; i++) expect(q.body.attributes[`a${i}`]).to.deep.equal([{ value: String(i) }])
  })

  it('counts 500 concurrent events on one visitor exactly', async () => {
    const tenant = await createTenant(beacon.url)
    const id = visitorId()
    const answers = await Promise.all(Array.from({ length: 500 }, (_, i) =>
      post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: id, platform: 'web', event: 'productView', sku: `S${i % 7}` })))
    expect(answers.every(r => r.status === 200)).to.equal(true)
    const state = await admin(beacon.url, 'GET', `/admin/accounts/${tenant.account}/visitors/${id}`)
    expect(state.body.counts).to.deep.equal({ productView: 500 })
  })
})

async function writeRound (url: string, tenant: { account: string, token: string }, visitor: string, round: number, kind: string) {
  switch (kind) {
    case 'visitor-attribute':
      return post(url, '/visitors/attributes', { account: tenant.account, visitorId: visitor, token: tenant.token, attributes: { [`r${round}`]: `v${round}` } })
    case 'profile-segment':
      return post(url, '/profiles/segments', { account: tenant.account, profileId: 'durable', token: tenant.token, assignees: [`s${round}`] })
    default:
      return post(url, '/campaigns/query', { account: tenant.account, visitorId: visitor, platform: 'web', event: 'purchase', orderId: `o${round}`, orderTotal: 1 })
  }
}

async function expectRound (url: string, tenant: { account: string, token: string }, visitor: string, round: number, kind: string): Promise<void> {
  switch (kind) {
    case 'visitor-attribute': {
      const q = await post(url, '/visitors/query', { account: tenant.account, visitorId: visitor, token: tenant.token, attributes: [`r${round}`] })
      expect(q.body.attributes, `round ${round}`).to.deep.equal({ [`r${round}`]: [{ value: `v${round}` }] })
      return
    }
    case 'profile-segment': {
      const q = await post(url, '/profiles/query', { account: tenant.account, profileId: 'durable', token: tenant.token, segments: [`s${round}`] })
      expect(q.body.segments, `round ${round}`).to.deep.equal([`s${round}`])
      return
    }
    default: {
      const state = await admin(url, 'GET', `/admin/accounts/${tenant.account}/visitors/${visitor}`)
      // Purchases happen every third round, from round 2: round r is the (r+1)/3-th.
      expect(state.body.purchases, `round ${round}`).to.equal((round + 1) / 3)
    }
  }
}
