// Opening a stream or bucket right after a NATS cluster started, or while one of its servers is down,
// meets an election in progress: requests time out, find no responder, or JetStream answers 10008
// ("JetStream system temporarily unavailable"). Those are retried until a deadline; any other JetStream
// answer (a real refusal, e.g. a stream of that name with another configuration) is not.

import { JetStreamApiError } from '@nats-io/jetstream'

const TEMPORARILY_UNAVAILABLE = 10008
const STREAM_NOT_FOUND = 10059
const STREAM_NAME_IN_USE = 10058
const SUBJECT_OVERLAP = 10065
const PAUSE_MS = 100

/**
 * Runs `operation` until it succeeds, retrying transient failures for up to `timeoutMs`; and those
 * `alsoTransient` accepts (e.g. isStreamNotFound for a stream known to exist).
 */
export async function retryWhileElecting<T> (operation: () => Promise<T>, timeoutMs = 30_000, alsoTransient: (error: unknown) => boolean = () => false): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    try {
      return await operation()
    } catch (error) {
      if (!(isTransient(error) || alsoTransient(error)) || Date.now() >= deadline) throw error
      await new Promise(resolve => setTimeout(resolve, PAUSE_MS))
    }
  }
}

export function isTransient (error: unknown): boolean {
  if (error instanceof JetStreamApiError) return error.code === TEMPORARILY_UNAVAILABLE
  return error instanceof Error
}

/**
 * "stream not found" (10059) for a stream that was just created or found: nats-server 2.10 answers a
 * request right after a stream's creation from a server that has not applied it yet (the metadata
 * leader, when the stream leader answered the creation first: nats-server PR #8410, merged in 2026; a
 * replica whose stream is still being set up). Transient there, never where the stream may be absent.
 */
export function isStreamNotFound (error: unknown): boolean {
  return error instanceof JetStreamApiError && error.code === STREAM_NOT_FOUND
}

/**
 * "subjects overlap with an existing stream" (10065) for a stream update racing another update (or an
 * equal creation) of the same stream: nats-server 2.10.27's metadata leader releases its lock while it
 * checks the new configuration (jsClusteredStreamUpdateRequest), and then compares the stream's
 * assignment with the others by pointer, so a change of the same stream applied in between is taken
 * for another stream with the same subjects (fixed after 2.10: nats-server commit cfbbd7b2a compares
 * names). Transient only where the subjects are the stream's own: look the stream up again.
 */
export function isSubjectOverlap (error: unknown): boolean {
  return error instanceof JetStreamApiError && error.code === SUBJECT_OVERLAP
}

/** "stream name already in use" (10058): a creation racing another node's creation of the stream with other settings. */
export function isStreamNameInUse (error: unknown): boolean {
  return error instanceof JetStreamApiError && error.code === STREAM_NAME_IN_USE
}
