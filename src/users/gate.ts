// At most `concurrency` password hashes at once, at most `queueMax` waiting: scrypt runs on libuv's
// thread pool (four threads by default), which webhook DNS lookups share, so a burst of sign-ins must
// not take all of it. Past the queue a sign-in is refused at once (503 overloaded) rather than waited on.

import { ApiError } from '../errors.js'

export class Gate {
  private readonly concurrency: number
  private readonly queueMax: number
  private running = 0
  private readonly waiting: (() => void)[] = []

  constructor (concurrency: number, queueMax: number) {
    this.concurrency = concurrency
    this.queueMax = queueMax
  }

  async run<T> (task: () => Promise<T>): Promise<T> {
    if (this.running >= this.concurrency) {
      if (this.waiting.length >= this.queueMax) throw new ApiError('overloaded', 'Too many sign-ins at once; retry shortly.', undefined, { 'Retry-After': '1' })
      await new Promise<void>(resolve => this.waiting.push(resolve))
    } else {
      this.running++
    }
    try {
      return await task()
    } finally {
      // The slot passes straight to the next waiter (running stays the same), or is freed.
      const next = this.waiting.shift()
      if (next === undefined) this.running--
      else next()
    }
  }
}
