import { expect } from 'chai'
import { Gate } from '../../src/users/gate.js'
import { ApiError } from '../../src/errors.js'

describe('password hashing gate', () => {
  it('runs at most `concurrency` tasks at once, queues up to `queueMax`, refuses the rest with 503 overloaded', async () => {
    const gate = new Gate(2, 3)
    let running = 0
    let peak = 0
    const releases: (() => void)[] = []
    const task = (): Promise<string> => new Promise(resolve => {
      running++
      peak = Math.max(peak, running)
      releases.push(() => { running--; resolve('done') })
    })
    const accepted = [1, 2, 3, 4, 5].map(() => gate.run(task))
    const refused = await gate.run(task).then(() => null, (error: unknown) => error)
    expect(refused).to.be.instanceOf(ApiError)
    expect((refused as ApiError).status).to.equal(503)
    expect((refused as ApiError).items[0]!.code).to.equal('overloaded')
    expect((refused as ApiError).headers).to.deep.equal({ 'Retry-After': '1' })
    await new Promise(resolve => setImmediate(resolve))
    expect(running).to.equal(2)
    // Each finished task lets one waiting task start, never more than two at once.
    while (releases.length > 0) {
      releases.shift()!()
      await new Promise(resolve => setImmediate(resolve))
    }
    expect(await Promise.all(accepted)).to.deep.equal(['done', 'done', 'done', 'done', 'done'])
    expect(peak).to.equal(2)
    // Free again: a new task runs at once.
    const later = gate.run(task)
    await new Promise(resolve => setImmediate(resolve))
    expect(running).to.equal(1)
    releases.shift()!()
    expect(await later).to.equal('done')
  })

  it('frees the slot when a task fails', async () => {
    const gate = new Gate(1, 0)
    await gate.run(() => Promise.reject(new Error('boom'))).catch(() => {})
    expect(await gate.run(() => Promise.resolve(7))).to.equal(7)
  })
})
