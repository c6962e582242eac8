#!/usr/bin/env node
// The `beacon` command (the package's bin). One table of commands, each with its options; arguments
// are parsed strictly (node:util parseArgs), so a mistyped option is a usage error, never ignored.
// Exit codes: 0 done, 1 refused by the server or failed, 2 wrong command line (src/cli/errors.ts).

import { parseArgs } from 'node:util'
import { adminKeyCommand, type Output } from './cli/admin-key.js'
import { accountsCreate, accountsList } from './cli/accounts.js'
import { backup } from './cli/backup.js'
import { AdminClient, resolveConnection } from './cli/client.js'
import { CliError, EXIT, UsageError } from './cli/errors.js'
import { tokensCreate, tokensList, tokensRevoke } from './cli/tokens.js'
import { exportAccount, importAccount } from './cli/transfer.js'
import { exportEvents } from './cli/export-events.js'
import { importEvents } from './cli/import-events.js'
import { usersAdd } from './cli/users.js'
import { USAGE } from './cli/usage.js'
import { VERSION } from './package-root.js'

type Values = Record<string, string | boolean | undefined>
type OptionSpec = Record<string, { type: 'string' | 'boolean' }>

interface Command {
  options: OptionSpec
  /** Options that must be given. */
  required?: string[]
  /** Talks to a running server (takes --url and --admin-key). */
  http?: boolean
  /** Takes one file name after its options (given to run as `values.file`). */
  positional?: boolean
  run: (values: Values, output: Output, client: AdminClient | null) => Promise<void> | void
}

const str = { type: 'string' } as const
const HTTP_OPTIONS: OptionSpec = { url: str, 'admin-key': str }

const COMMANDS: Record<string, Command> = {
  start: {
    options: {},
    async run () {
      const { runServer } = await import('./start.js')
      runServer()
    },
  },
  'admin-key': {
    options: { rotate: { type: 'boolean' } },
    run: (values, output) => adminKeyCommand(values.rotate === true, process.env, output),
  },
  backup: {
    options: { out: str, 'data-dir': str },
    required: ['out'],
    run: (values, output) => backup(text(values['data-dir']) ?? (process.env.BEACON_DATA_DIR || './data'), text(values.out)!, output),
  },
  'secrets rotate': {
    options: {},
    // Imported when run: it loads the store and the catalogs (~0.8 s of CPU), which no other command needs.
    run: async (_values, output) => { await (await import('./cli/secrets.js')).secretsRotate(process.env, output) },
  },
  'accounts create': {
    options: { name: str }, required: ['name'], http: true,
    run: (values, output, client) => accountsCreate(client!, text(values.name)!, output),
  },
  'accounts list': {
    options: {}, http: true,
    run: (_values, output, client) => accountsList(client!, output),
  },
  'tokens create': {
    options: { account: str, name: str, attributes: str, access: str, rate: str },
    required: ['account', 'name', 'attributes', 'access'], http: true,
    run: (values, output, client) => tokensCreate(client!, {
      account: text(values.account)!, name: text(values.name)!, attributes: text(values.attributes)!, access: text(values.access)!, rate: text(values.rate),
    }, output),
  },
  'tokens list': {
    options: { account: str }, required: ['account'], http: true,
    run: (values, output, client) => tokensList(client!, text(values.account)!, output),
  },
  'tokens revoke': {
    options: { account: str, id: str }, required: ['account', 'id'], http: true,
    run: (values, output, client) => tokensRevoke(client!, text(values.account)!, text(values.id)!, output),
  },
  'users add': {
    options: { account: str, email: str, role: str, name: str }, required: ['account', 'email', 'role'], http: true,
    run: (values, output, client) => usersAdd(client!, {
      account: text(values.account)!, email: text(values.email)!, role: text(values.role)!, name: text(values.name),
    }, output),
  },
  export: {
    options: { account: str, out: str }, required: ['account'], http: true,
    run: (values, output, client) => exportAccount(client!, text(values.account)!, text(values.out), output),
  },
  'export-events': {
    options: { account: str, from: str, to: str, out: str }, required: ['account', 'from', 'to'], http: true,
    run: (values, output, client) => exportEvents(client!, { account: text(values.account)!, from: text(values.from)!, to: text(values.to)!, out: text(values.out) }, output),
  },
  'import-events': {
    options: { account: str, deliver: { type: 'boolean' } }, required: ['account'], http: true, positional: true,
    run: (values, output, client) => importEvents(client!, { account: text(values.account)!, file: text(values.file)!, deliver: values.deliver === true }, output),
  },
  import: {
    options: { account: str, file: str }, required: ['account', 'file'], http: true,
    run: (values, output, client) => importAccount(client!, text(values.account)!, text(values.file)!, output),
  },
}

function text (value: string | boolean | undefined): string | undefined {
  return typeof value === 'string' ? value : undefined
}

/** Which command the words name (`tokens create` or `export`), and the arguments after them. */
function findCommand (args: string[]): { name: string, command: Command, rest: string[] } {
  const [first, second] = args
  if (first === undefined) throw new UsageError('no command given')
  const two = `${first} ${second ?? ''}`
  if (COMMANDS[two] !== undefined) return { name: two, command: COMMANDS[two], rest: args.slice(2) }
  if (COMMANDS[first] !== undefined) return { name: first, command: COMMANDS[first], rest: args.slice(1) }
  const group = Object.keys(COMMANDS).filter(name => name.startsWith(first + ' '))
  if (group.length > 0) {
    throw new UsageError(second === undefined || second.startsWith('-')
      ? `"${first}" needs a subcommand: ${group.join(', ')}`
      : `unknown command "${two}"; try ${group.join(', ')}`)
  }
  throw new UsageError(`unknown command "${first}"`)
}

async function run (args: string[], output: Output): Promise<number> {
  if (args.length === 0 || args[0] === 'help' || args[0] === '--help' || args[0] === '-h') {
    output.out(USAGE)
    return args.length === 0 ? EXIT.usage : EXIT.ok
  }
  if (args[0] === '--version' || args[0] === 'version') {
    output.out(VERSION + '\n')
    return EXIT.ok
  }
  try {
    const { name, command, rest } = findCommand(args)
    const options = command.http === true ? { ...command.options, ...HTTP_OPTIONS } : command.options
    let values: Values
    try {
      const parsed = parseArgs({ args: rest, options, strict: true, allowPositionals: command.positional === true })
      values = parsed.values
      if (command.positional === true) {
        if (parsed.positionals.length !== 1) throw new Error('expected one file name')
        values.file = parsed.positionals[0]
      }
    } catch (error) {
      throw new UsageError(`${name}: ${(error as Error).message}`)
    }
    for (const option of command.required ?? []) {
      if (typeof values[option] !== 'string' || values[option] === '') throw new UsageError(`${name}: --${option} is required`)
    }
    const client = command.http === true ? new AdminClient(resolveConnection(values as { url?: string, 'admin-key'?: string })) : null
    await command.run(values, output, client)
    return EXIT.ok
  } catch (error) {
    if (error instanceof UsageError) {
      output.err(`beacon: ${error.message}\n\nRun "beacon help" for the commands and their options.\n`)
      return error.exitCode
    }
    if (error instanceof CliError) {
      output.err(`beacon: ${error.message}\n`)
      return error.exitCode
    }
    throw error
  }
}

const stdio: Output = {
  out: text => { process.stdout.write(text) },
  err: text => { process.stderr.write(text) },
}

run(process.argv.slice(2), stdio).then(code => {
  // `start` keeps running (the server holds the event loop); everything else ends here.
  if (code !== EXIT.ok || process.argv[2] !== 'start') process.exitCode = code
}, (error: unknown) => {
  process.stderr.write(`beacon: unexpected error: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`)
  process.exitCode = EXIT.failed
})
