// The CLI's two kinds of failure and their exit codes: the command line was wrong (2), or the command
// could not be done: the server refused, could not be reached, a file could not be read (1).

export const EXIT = { ok: 0, failed: 1, usage: 2 } as const

export class UsageError extends Error {
  readonly exitCode = EXIT.usage
}

export class CliError extends Error {
  readonly exitCode = EXIT.failed
}
