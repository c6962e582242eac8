// Opening a stream or bucket right after a NATS cluster started, or while one of its servers is down,
// meets an election in progress: requests time out, find no responder, or JetStream answers 10008
// ("JetStream system temporarily unavailable"). Those are retried until a deadline; any other JetStream
// answer (a real refusal, e.g. a stream of that name with another configuration) is not.

import { JetStreamApiError } from '@nats-io/jetstream'

const TEMPORARILY_UNAVAILABLE = 10008
const PAUSE_MS = 100

/** Runs `operation` until it succeeds, retrying transient failures for up to `timeoutMs`. */
export async function retryWhileElecting<T> (operation: () => Promise<T>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    try {
      return await operation()
    } catch (error) {
      if (!isTransient(error) || Date.now() >= deadline) throw error
      await new Promise(resolve => setTimeout(resolve, PAUSE_MS))
    }
  }
}

export function isTransient (error: unknown): boolean {
  if (error instanceof JetStreamApiError) return error.code === TEMPORARILY_UNAVAILABLE
  return error instanceof Error
}
