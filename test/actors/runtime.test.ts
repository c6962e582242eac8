import { expect } from 'chai'
import { ActorRuntime, PARTITIONS, partitionOf, type Actor, type ActorKind } from '../../actors/runtime.js'
import { manualClock } from '../helpers/clock.js'
import { until } from '../helpers/until.js'

interface Counter { n: number }
type Message = { type: 'add', by: number, write?: Promise<void> } | { type: 'slow', done: Promise<void> } | { type: 'fail' }
  | { type: 'addLater', done: Promise<void>, write: () => Promise<void>, thenThrow?: boolean }

/** A kind whose "disk" is a map: loads count activations, writes are promises the test controls. */
function counterKind (disk: Map<string, number>, loads: string[]): ActorKind<Counter, Message, { add: number, slow: number, fail: never, addLater: number }> {
  return {
    name: 'counter',
    load (account, id) {
      loads.push(id)
      return { n: disk.get(account + '/' + id) ?? 0 }
    },
    handle (actor: Actor<Counter>, message) {
      if (message.type === 'fail') throw new Error('refused')
      if (message.type === 'slow') return message.done.then(() => actor.state.n)
      if (message.type === 'addLater') {
        // As a linked visitor: an await (its profile), then the write, in the handler's promise.
        return message.done.then(() => {
          actor.state.n += 1
          actor.track(message.write())
          if (message.thenThrow === true) throw new Error('profile unreachable')
          return actor.state.n
        })
      }
      actor.state.n += message.by
      disk.set(actor.account + '/' + actor.id, actor.state.n)
      if (message.write !== undefined) actor.track(message.write)
      return actor.state.n
    },
  }
}

describe('actor runtime', () => {
  let runtime: ActorRuntime
  afterEach(() => runtime.close())

  it('runs messages of one key one at a time, in order, including around an async handler', async () => {
    const clock = manualClock()
    runtime = new ActorRuntime({ clock, actorsMax: 100, actorIdleMs: 60_000, mailboxMax: 100 })
    const kind = counterKind(new Map(), [])
    let release!: () => void
    const slow = runtime.send(kind, 'acc', 'k', { type: 'slow', done: new Promise<void>(resolve => { release = resolve }) })
    const adds = [1, 2, 3].map(by => runtime.send(kind, 'acc', 'k', { type: 'add', by }))
    release()
    expect(await slow).to.equal(0)
    expect(await Promise.all(adds)).to.deep.equal([1, 3, 6])
  })

  it('answers only once the write of the message is durable', async () => {
    runtime = new ActorRuntime({ clock: manualClock(), actorsMax: 100, actorIdleMs: 60_000, mailboxMax: 100 })
    const kind = counterKind(new Map(), [])
    let durable!: () => void
    let answered = false
    const reply = runtime.send(kind, 'acc', 'k', { type: 'add', by: 1, write: new Promise<void>(resolve => { durable = resolve }) })
      .then(n => { answered = true; return n })
    await new Promise(resolve => setImmediate(resolve))
    expect(answered).to.equal(false)
    durable()
    expect(await reply).to.equal(1)
  })

  it('refuses a message past the mailbox limit with 503 overloaded', async () => {
    runtime = new ActorRuntime({ clock: manualClock(), actorsMax: 100, actorIdleMs: 60_000, mailboxMax: 2 })
    const kind = counterKind(new Map(), [])
    let release!: () => void
    const slow = runtime.send(kind, 'acc', 'k', { type: 'slow', done: new Promise<void>(resolve => { release = resolve }) })
    const queued = [runtime.send(kind, 'acc', 'k', { type: 'add', by: 1 }), runtime.send(kind, 'acc', 'k', { type: 'add', by: 1 })]
    let refused: unknown = null
    await runtime.send(kind, 'acc', 'k', { type: 'add', by: 1 }).catch((error: unknown) => { refused = error })
    expect(refused).to.include({ status: 503 })
    expect((refused as { headers: unknown }).headers).to.deep.equal({ 'Retry-After': '1' })
    expect(runtime.mailboxDepth).to.equal(2)
    release()
    await slow
    expect(await Promise.all(queued)).to.deep.equal([1, 2])
    expect(runtime.mailboxDepth).to.equal(0)
  })

  it('rejects a throwing message without stopping the next ones', async () => {
    runtime = new ActorRuntime({ clock: manualClock(), actorsMax: 100, actorIdleMs: 60_000, mailboxMax: 100 })
    const kind = counterKind(new Map(), [])
    const failed = runtime.send(kind, 'acc', 'k', { type: 'fail' })
    const next = runtime.send(kind, 'acc', 'k', { type: 'add', by: 5 })
    await failed.then(() => expect.fail('should reject'), (error: Error) => expect(error.message).to.equal('refused'))
    expect(await next).to.equal(5)
  })

  it('passivates idle actors and reactivates them from the store', async () => {
    const clock = manualClock()
    runtime = new ActorRuntime({ clock, actorsMax: 100, actorIdleMs: 1_000, mailboxMax: 100 })
    const loads: string[] = []
    const kind = counterKind(new Map(), loads)
    await runtime.send(kind, 'acc', 'k', { type: 'add', by: 1 })
    expect(runtime.residentCount).to.equal(1)
    clock.advance(1_001)
    // The sweep runs on a real timer every actorIdleMs/2; the clock decides who is idle.
    await until('the idle actor passivated by the sweep', () => runtime.residentCount === 0, 5000)
    expect(await runtime.send(kind, 'acc', 'k', { type: 'add', by: 1 })).to.equal(2)
    expect(loads).to.deep.equal(['k', 'k'])
  })

  it('passivates the least recently used actors over the resident cap, never one with a pending write', async () => {
    runtime = new ActorRuntime({ clock: manualClock(), actorsMax: 100, actorIdleMs: 60_000, mailboxMax: 100 })
    const loads: string[] = []
    const kind = counterKind(new Map(), loads)
    let durable!: () => void
    const pending = runtime.send(kind, 'acc', 'held', { type: 'add', by: 1, write: new Promise<void>(resolve => { durable = resolve }) })
    for (let i = 0; i < 150; i++) await runtime.send(kind, 'acc', `k${i}`, { type: 'add', by: 1 })
    expect(runtime.residentCount).to.equal(100)
    expect(runtime.passivations).to.equal(51)
    durable()
    await pending
    // 'held' was the oldest but stayed resident while its write was pending: no second load.
    expect(await runtime.send(kind, 'acc', 'held', { type: 'add', by: 1 })).to.equal(2)
    expect(loads.filter(id => id === 'held')).to.have.length(1)
    // k0 was passivated: its next message loads it again.
    await runtime.send(kind, 'acc', 'k0', { type: 'add', by: 1 })
    expect(loads.filter(id => id === 'k0')).to.have.length(2)
  })

  it('reloads from the store after a failed write instead of serving state that is not on disk', async () => {
    runtime = new ActorRuntime({ clock: manualClock(), actorsMax: 100, actorIdleMs: 60_000, mailboxMax: 100 })
    const disk = new Map<string, number>()
    const loads: string[] = []
    const kind = counterKind(disk, loads)
    await runtime.send(kind, 'acc', 'k', { type: 'add', by: 1 })
    const failing = runtime.send(kind, 'acc', 'k', { type: 'add', by: 10, write: Promise.reject(new Error('disk full')) })
    await failing.then(() => expect.fail('should reject'), (error: Error) => expect(error.message).to.equal('disk full'))
    disk.set('acc/k', 1) // what actually reached the disk
    expect(await runtime.send(kind, 'acc', 'k', { type: 'add', by: 1 })).to.equal(2)
    expect(loads).to.deep.equal(['k', 'k'])
  })
})

describe('actor runtime: a write refused at once in an async handler (issue 26)', () => {
  let runtime: ActorRuntime
  const unhandled: unknown[] = []
  const onUnhandled = (reason: unknown): void => { unhandled.push(reason) }
  beforeEach(() => {
    unhandled.length = 0
    process.prependListener('unhandledRejection', onUnhandled)
    runtime = new ActorRuntime({ clock: manualClock(), actorsMax: 100, actorIdleMs: 60_000, mailboxMax: 100 })
  })
  afterEach(() => {
    process.removeListener('unhandledRejection', onUnhandled)
    runtime.close()
  })

  /** Lets pending rejections be reported (Node reports them after the microtasks of a macrotask). */
  async function settle (): Promise<void> {
    for (let i = 0; i < 3; i++) await new Promise(resolve => setImmediate(resolve))
  }

  it('rejects the message, never answers it as done, and leaves no unhandled rejection', async () => {
    const kind = counterKind(new Map(), [])
    // The entity log refuses at once a write of a partition no longer held (an already rejected promise).
    const outcome = await runtime.send(kind, 'acc', 'k', { type: 'addLater', done: Promise.resolve(), write: () => Promise.reject(new Error('partition_moved')) })
      .then(n => ({ answered: n }), (error: Error) => ({ refused: error.message }))
    await settle()
    expect(outcome).to.deep.equal({ refused: 'partition_moved' })
    expect(unhandled).to.deep.equal([])
  })

  it('rejects with the handler\'s own error when it fails after a refused write, with no unhandled rejection', async () => {
    const kind = counterKind(new Map(), [])
    const outcome = await runtime.send(kind, 'acc', 'k', { type: 'addLater', done: Promise.resolve(), write: () => Promise.reject(new Error('partition_moved')), thenThrow: true })
      .then(n => ({ answered: n }), (error: Error) => ({ refused: error.message }))
    await settle()
    expect(outcome).to.deep.equal({ refused: 'profile unreachable' })
    expect(unhandled).to.deep.equal([])
  })

  it('serves the next message from a fresh activation, and passivates the broken one', async () => {
    const disk = new Map<string, number>()
    const loads: string[] = []
    const kind = counterKind(disk, loads)
    await runtime.send(kind, 'acc', 'k', { type: 'addLater', done: Promise.resolve(), write: () => Promise.reject(new Error('partition_moved')) }).catch(() => {})
    expect(await runtime.send(kind, 'acc', 'k', { type: 'add', by: 5 })).to.equal(5)
    expect(loads).to.deep.equal(['k', 'k'])
    expect(runtime.evict(() => true)).to.equal(1)
    expect(runtime.residentCount).to.equal(0)
  })
})

describe('partitionOf', () => {
  it('is stable and spreads keys over all partitions', () => {
    expect(partitionOf('acc', 'visitor-1')).to.equal(partitionOf('acc', 'visitor-1'))
    expect(partitionOf('a', 'bc')).not.to.equal(partitionOf('ab', 'c'))
    const seen = new Set<number>()
    for (let i = 0; i < 10_000; i++) seen.add(partitionOf('acc', `visitor-${i}`))
    expect(seen.size).to.equal(PARTITIONS)
  })

  it('resolves each message with its own reply type (checked by the compiler: no caller casts)', async () => {
    const runtime = new ActorRuntime({ clock: manualClock(), actorsMax: 10, actorIdleMs: 60_000, mailboxMax: 10 })
    type Ask = { type: 'name' } | { type: 'count', by: number }
    const kind: ActorKind<{ n: number }, Ask, { name: string, count: number }> = {
      name: 'typed',
      load: () => ({ n: 0 }),
      handle (actor, message) { return message.type === 'name' ? actor.id : (actor.state.n += message.by) },
    }
    const name: string = await runtime.send(kind, 'acc', 'k', { type: 'name' })
    const count: number = await runtime.send(kind, 'acc', 'k', { type: 'count', by: 2 })
    // @ts-expect-error a count is a number, not a string
    const wrong: string = await runtime.send(kind, 'acc', 'k', { type: 'count', by: 1 })
    expect([name, count, wrong]).to.deep.equal(['k', 2, 3])
    runtime.close()
  })
})
