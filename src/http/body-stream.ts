// A request body read as it arrives (routes declared with `body: 'stream'`: an import's NDJSON): the
// chunks uWS hands to onData, copied (uWS reuses its buffer) and queued for the handler, which reads them
// with `for await`. At most `highWaterBytes` wait in memory: past it the socket is paused (uWS stops
// reading, TCP pushes back on the client) until the handler has taken them. A body larger than its
// route's limit, or a client gone mid-body, fails the read with that error.

import { ApiError } from '../errors.js'

/** What the queue may hold before the socket is paused. */
export const BODY_STREAM_HIGH_WATER_BYTES = 1 << 20

export class BodyStream implements AsyncIterable<Buffer> {
  /** Bytes received so far (the whole body once it ended). */
  received = 0
  private readonly chunks: Buffer[] = []
  private queued = 0
  private ended = false
  private paused = false
  private failure: Error | null = null
  private wake: (() => void) | null = null
  private readonly maxBytes: number
  private readonly pause: () => void
  private readonly resume: () => void

  constructor (maxBytes: number, pause: () => void, resume: () => void) {
    this.maxBytes = maxBytes
    this.pause = pause
    this.resume = resume
  }

  /** From onData: a copy of the chunk is queued (refused past the limit: the read fails with 413). */
  push (chunk: ArrayBuffer, last: boolean): void {
    if (this.ended || this.failure !== null) return
    this.received += chunk.byteLength
    if (this.received > this.maxBytes) {
      this.fail(new ApiError('body_too_large', `The body is larger than ${this.maxBytes} bytes.`))
      return
    }
    if (chunk.byteLength > 0) {
      this.chunks.push(Buffer.from(new Uint8Array(chunk)))
      this.queued += chunk.byteLength
    }
    if (last) this.ended = true
    else if (!this.paused && this.queued > BODY_STREAM_HIGH_WATER_BYTES) {
      this.paused = true
      this.pause()
    }
    this.notify()
  }

  /** The client went away, or the body is refused: the reader's next read throws it; nothing more is queued. */
  fail (error: Error): void {
    if (this.ended || this.failure !== null) return
    this.failure = error
    this.chunks.length = 0
    this.queued = 0
    this.notify()
  }

  /**
   * The answer was given before the body ended (a refusal): the rest is read and dropped, so the client
   * is not left blocked mid-upload.
   */
  drop (): void {
    this.fail(new ApiError('body_too_large', 'The request was answered before its body ended.'))
    if (this.paused) {
      this.paused = false
      this.resume()
    }
  }

  async * [Symbol.asyncIterator] (): AsyncGenerator<Buffer> {
    for (;;) {
      const chunk = this.chunks.shift()
      if (chunk !== undefined) {
        this.queued -= chunk.byteLength
        if (this.paused && this.queued <= BODY_STREAM_HIGH_WATER_BYTES / 2) {
          this.paused = false
          this.resume()
        }
        yield chunk
        continue
      }
      if (this.failure !== null) throw this.failure
      if (this.ended) return
      await new Promise<void>(resolve => { this.wake = resolve })
    }
  }

  private notify (): void {
    const wake = this.wake
    this.wake = null
    if (wake !== null) wake()
  }
}
