// A change to a large account's campaigns is compiled off the request path: the build runs in slices,
// requests in flight meanwhile are answered with the previous set, and the new set is swapped in whole.

import { expect } from 'chai'
import { admin, createTenant, discardBeacon, post, startBeacon, visitorId, type BeaconProcess } from '../helpers/beacon.js'
import { CAMPAIGNS_MAX } from '../../src/store/limits.js'

/** The largest event-loop block since the previous scrape (prom-client resets its histogram on each). */
async function loopLagMaxMs (url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text()
  const match = /^nodejs_eventloop_lag_max_seconds (\S+)$/m.exec(text)
  if (match === null) throw new Error('no nodejs_eventloop_lag_max_seconds in /metrics')
  return Number(match[1]) * 1000
}

/**
 * A rule of some weight (nine leaves: a list, a glob, negations), so that the build takes long enough for
 * requests to arrive between its slices on a fast machine too; it matches `productView` of `sku-${i}`.
 */
function campaignRule (i: number): object {
  return {
    all: [
      { fact: 'event.sku', op: 'eq', value: `sku-${i}` },
      {
        any: [
          { fact: 'attribute.plan', op: 'in', value: Array.from({ length: 20 }, (_, n) => `plan-${i}-${n}`) },
          { fact: 'event.price', op: 'gte', value: i },
          { fact: 'event.category', op: 'glob', value: `c${i}/*` },
          { not: { fact: 'event.sku', op: 'startsWith', value: `x${i}` } },
        ],
      },
      { not: { fact: 'event.sku', op: 'endsWith', value: `-x${i}` } },
      { any: [{ fact: 'event.sku', op: 'startsWith', value: 'sku-' }, { fact: 'attribute.tier', op: 'gt', value: i }] },
      { fact: 'event.sku', op: 'ne', value: `sku-${i + 1}` },
    ],
  }
}

describe('campaign recompiles off the request path', function () {
  this.timeout(300_000)
  let beacon: BeaconProcess

  before(async () => { beacon = await startBeacon() })
  after(() => discardBeacon(beacon))

  it(`answers the requests in flight during a change of a ${CAMPAIGNS_MAX.toLocaleString('en-US')}-campaign account with the previous set, then the new one`, async () => {
    const tenant = await createTenant(beacon.url)
    const base = `/admin/accounts/${tenant.account}/campaigns`
    const marker = (v: number): object => ({ name: 'marker', status: 'active', priority: 100, trigger: { events: ['pageView'] }, content: { v } })
    expect((await admin(beacon.url, 'PUT', `${base}/marker`, marker(1))).status).to.equal(200)
    let next = 0
    await Promise.all(Array.from({ length: 32 }, async () => {
      while (next < CAMPAIGNS_MAX - 1) {
        const i = next++
        const res = await admin(beacon.url, 'PUT', `${base}/c${i}`, {
          name: `c${i}`, status: 'active', priority: 1, trigger: { events: ['productView'] },
          rule: campaignRule(i), content: { i },
        })
        if (res.status !== 200) throw new Error(`PUT c${i}: ${res.status} ${JSON.stringify(res.body)}`)
      }
    }))

    const version = async (): Promise<number> => {
      const res = await post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: visitorId(), platform: 'web', event: 'pageView' })
      expect(res.status).to.equal(200)
      expect(res.body.campaigns).to.have.length(1)
      return res.body.campaigns[0].content.v as number
    }
    // The bulk load's builds are done when a query answers the whole set; then the change.
    while ((await (await post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: visitorId(), platform: 'web', event: 'productView', sku: `sku-${CAMPAIGNS_MAX - 2}` })).body.campaigns).length === 0) { /* building */ }
    expect(await version()).to.equal(1)
    await loopLagMaxMs(beacon.url)

    // Queries in a loop from before the change until the new set answers; each remembers whether it was
    // sent after the change was answered. Requests sent after the change was acknowledged must be
    // answered with the previous set while the new one is built in slices (a build in one block, whether
    // before the answer or at the first request after it, would answer them all with the new set). The
    // change is acknowledged once durable: when the fsync outlasts the build (a busy disk), the new set
    // is already in effect at the answer and the round shows nothing, so up to five changes are made.
    const change = async (from: number, to: number): Promise<{ oldAfterChange: number, lagMs: number, inEffectMs: number }> => {
      let changed = false
      let changedAtMs = 0
      let firstNewAtMs = 0
      const answers: Array<{ v: number, sentAfterChange: boolean, sentAfterNew: boolean }> = []
      let stop = false
      const clients = Array.from({ length: 4 }, async () => {
        while (!stop) {
          const sentAfterChange = changed
          const sentAfterNew = firstNewAtMs > 0
          const v = await version()
          if (v === to && firstNewAtMs === 0) firstNewAtMs = performance.now()
          answers.push({ v, sentAfterChange, sentAfterNew })
          if (answers.filter(a => a.v === to).length >= 20) stop = true
        }
      })
      await new Promise(resolve => setTimeout(resolve, 50))
      const put = await admin(beacon.url, 'PUT', `${base}/marker`, marker(to))
      changed = true
      changedAtMs = performance.now()
      expect(put.status).to.equal(200)
      await Promise.all(clients)
      // Once the new set answered, no request saw the old one again, and none saw anything else.
      expect(answers.filter(a => a.sentAfterNew && a.v === from)).to.deep.equal([])
      expect(answers.every(a => a.v === from || a.v === to)).to.equal(true)
      return { oldAfterChange: answers.filter(a => a.sentAfterChange && a.v === from).length, lagMs: await loopLagMaxMs(beacon.url), inEffectMs: firstNewAtMs - changedAtMs }
    }
    const rounds: Array<{ oldAfterChange: number, lagMs: number, inEffectMs: number }> = []
    for (let v = 1; v <= 5 && !rounds.some(round => round.oldAfterChange > 0); v++) rounds.push(await change(v, v + 1))
    // Measured for the record (prom-client's monitorEventLoopDelay, reset by the scrape before each change).
    for (const round of rounds) {
      console.log(`      longest event-loop block during the change: ${round.lagMs.toFixed(1)} ms; new set in effect ${round.inEffectMs.toFixed(0)} ms after the 200; ${round.oldAfterChange} answers from the old set after it`)
    }
    expect(rounds.map(round => round.oldAfterChange).some(n => n > 0), 'old set after the change').to.equal(true)
  })
})
