// Small waits of the transport: timers that never hold the process up.

export function sleep (ms: number): Promise<void> {
  return new Promise(resolve => setTimeout(resolve, ms).unref())
}

/** The promise's value, or undefined if it fails or takes longer than ms. */
export async function withTimeout<T> (promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<undefined>(resolve => { timer = setTimeout(() => resolve(undefined), ms) })
  try {
    return await Promise.race([promise.catch(() => undefined), timeout])
  } finally {
    clearTimeout(timer)
  }
}

export function errorText (error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
