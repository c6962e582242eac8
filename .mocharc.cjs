// Mocha's settings for every run (tests are TypeScript, loaded through tsx).
//
// The whole suite lists the slowest files first (measured, longest first), then the others:
// `npm test` runs it on two workers (--parallel), and a long file started last would make the
// whole run wait for it alone. A file missing here still runs: a test/cluster file (most start NATS
// servers and Beacon processes: tens of seconds) right after the listed ones, any other in path order
// after those, so that a new slow file never comes last by its name alone.
//
// Mocha adds a config's `spec` to the files named on the command line, so a `spec` here would make
// `npx mocha test/x.test.ts` run the whole suite after all: the whole suite is the default only when
// the command line names no test file, folder or glob (`--spec` included).

const VALUE_FLAGS = new Set(['--reporter', '-R', '--reporter-option', '--reporter-options', '-O', '--require', '-r',
  '--import', '--file', '--ignore', '--exclude', '--config', '--extension', '--grep', '-g', '--fgrep', '-f', '--ui', '-u',
  '--timeout', '-t', '--slow', '-s', '--jobs', '-j', '--node-option', '-n', '--retries', '--package', '--watch-files',
  '--watch-ignore'])

const { readdirSync } = require('node:fs')

const SLOWEST_FIRST = [
  // Cluster files (3 nats-servers and 3 or more Beacon processes each) alternate with the others, so
  // that two of them seldom run at once.
  'test/cluster/faults.test.ts',
  'test/http/durability.test.ts',
  'test/cluster/cluster-jobs.test.ts',
  'test/ops/cli.test.ts',
  'test/cluster/deliveries-any-node.test.ts',
  'test/http/webhooks-nats.test.ts',
  'test/cluster/beacon-cluster.test.ts',
  'test/http/recompile.test.ts',
  'test/cluster/cross-partition.test.ts',
  'test/store/secrets.test.ts',
  'test/cluster/erasure-any-node.test.ts',
  'test/http/webhooks.test.ts',
  'test/cluster/media-any-node.test.ts',
  'test/http/limits.test.ts',
  'test/cluster/reports-any-node.test.ts',
  'test/http/panel-access.test.ts',
  'test/cluster/shared-users.test.ts',
  'test/delivery/jetstream-queue.test.ts',
  'test/cluster/entity-log.test.ts',
  'test/ops/shutdown.test.ts',
  'test/cluster/delivery-ids.test.ts',
  'test/store/data-folder.test.ts',
  'test/cluster/balancer-churn.test.ts',
  'test/http/startup.test.ts',
  'test/cluster/destination-takeover.test.ts',
  'test/browser/panel-pages.test.ts',
  'test/cluster/visitor-retention.test.ts',
  'test/browser/sdk.test.ts',
  'test/cluster/event-batch.test.ts',
]

/** Every test file, the slowest first. */
function suite () {
  const all = readdirSync('test', { recursive: true })
    .filter(name => name.endsWith('.test.ts'))
    .map(name => `test/${name}`)
    .sort()
  const slow = SLOWEST_FIRST.filter(file => all.includes(file))
  const rest = all.filter(file => !slow.includes(file))
  const cluster = rest.filter(file => file.startsWith('test/cluster/'))
  return [...slow, ...cluster, ...rest.filter(file => !cluster.includes(file))]
}

function namesTests (args) {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]
    if (arg === '--spec' || arg.startsWith('--spec=')) return true
    if (VALUE_FLAGS.has(arg)) i++
    else if (!arg.startsWith('-')) return true
  }
  return false
}

module.exports = {
  'node-option': ['import=tsx'],
  require: [require.resolve('./test/helpers/file-times.cjs')],
  ...(namesTests(process.argv.slice(2)) ? {} : { spec: suite() }),
  // A folder on the command line (`npx mocha test/architecture`) runs its test files, not its helpers.
  extension: ['test.ts'],
  timeout: 60000,
  exit: true,
}
