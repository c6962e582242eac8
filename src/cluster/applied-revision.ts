// How far a node's watch of a replicated bucket has come: the highest revision it applied, callers
// waiting until it reaches one (a write of their own, or the bucket's last revision: read-your-writes
// across nodes), each for at most a bounded time. And `readyAt`: when a watch that started while the
// bucket's last revision was `lastRevision` has delivered everything the bucket held then.

export interface AppliedRevisionOptions {
  /** How long `wait` waits before it rejects with `timedOut(revision)`. */
  waitMs: number
  timedOut: (revision: number, waitMs: number) => Error
  /** Called after a wait timed out (the watch may have gone silent: restart it). */
  onTimeout?: () => void
}

interface Waiter {
  revision: number
  resolve: () => void
  reject: (error: Error) => void
  timer: NodeJS.Timeout
}

export class AppliedRevision {
  private applied = 0
  private waiters: Waiter[] = []
  private closedWith: Error | null = null

  constructor (private readonly options: AppliedRevisionOptions) {}

  /** Resolves once `revision` is applied; rejects after waitMs, or at once when closed. */
  wait (revision: number): Promise<void> {
    if (this.applied >= revision) return Promise.resolve()
    if (this.closedWith !== null) return Promise.reject(this.closedWith)
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        revision, resolve, reject,
        timer: setTimeout(() => {
          this.waiters = this.waiters.filter(other => other !== waiter)
          reject(this.options.timedOut(revision, this.options.waitMs))
          this.options.onTimeout?.()
        }, this.options.waitMs),
      }
      this.waiters.push(waiter)
    })
  }

  /** Everything up to `revision` is applied. */
  advance (revision: number): void {
    if (revision <= this.applied) return
    this.applied = revision
    if (this.waiters.length === 0) return
    const still: Waiter[] = []
    for (const waiter of this.waiters) {
      if (waiter.revision <= revision) {
        clearTimeout(waiter.timer)
        waiter.resolve()
      } else {
        still.push(waiter)
      }
    }
    this.waiters = still
  }

  /** Every wait under way and to come rejects with `error`. */
  close (error: Error): void {
    this.closedWith = error
    for (const waiter of this.waiters) {
      clearTimeout(waiter.timer)
      waiter.reject(error)
    }
    this.waiters = []
  }
}

/**
 * A watch delivers in revision order: it has caught up once it delivered the bucket's last revision at
 * the time it started. The returned function is told each revision delivered; `onReady` is called once
 * (at once when the bucket was empty).
 */
export function readyAt (lastRevision: number, onReady: (() => void) | undefined): (revision: number) => void {
  let ready = false
  const delivered = (revision: number): void => {
    if (ready || revision < lastRevision) return
    ready = true
    onReady?.()
  }
  if (lastRevision === 0) delivered(0)
  return delivered
}
