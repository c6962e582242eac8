// Mocha's settings for every run (tests are TypeScript, loaded through tsx).
//
// Mocha adds a config's `spec` to the files named on the command line, so a `spec` here would make
// `npx mocha test/x.test.ts` run the whole suite after all: the whole suite is the default only when
// the command line names no test file, folder or glob (`--spec` included).

const VALUE_FLAGS = new Set(['--reporter', '-R', '--reporter-option', '--reporter-options', '-O', '--require', '-r',
  '--import', '--file', '--ignore', '--exclude', '--config', '--extension', '--grep', '-g', '--fgrep', '-f', '--ui', '-u',
  '--timeout', '-t', '--slow', '-s', '--jobs', '-j', '--node-option', '-n', '--retries', '--package', '--watch-files',
  '--watch-ignore'])

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
  ...(namesTests(process.argv.slice(2)) ? {} : { spec: ['test/**/*.test.ts'] }),
  timeout: 60000,
  exit: true,
}
