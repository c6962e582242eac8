// Waiting on a condition instead of sleeping: polls until it holds, fails with what was awaited.

export async function until (condition: () => boolean, what: string, timeoutMs = 30_000, pollMs = 10): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, pollMs))
  }
}
