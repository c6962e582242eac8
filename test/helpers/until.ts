// The one way tests wait for something that happens on its own (a process, a socket, a log line, a
// delivery): poll until the condition holds, and fail naming what was awaited. Never for time-based
// logic: a manual clock (./clock.ts) drives that.

export async function until (what: string, condition: () => boolean | Promise<boolean>, timeoutMs = 15_000, pollMs = 2): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!await condition()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, pollMs))
  }
}
