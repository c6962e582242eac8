// The server bundle, built by esbuild at `npm run build` after tsc: the two process entry points,
// dist/src/main.js (the server) and dist/src/cli.js (the command line), each made one file over the
// same shared chunks (dist/src/chunks/), in place of tsc's files of the same names. A Beacon process
// start is module loading (resolving, reading and compiling each file): about 250 files of dist/src,
// typebox's 683 ES modules and undici's 100 CommonJS files. One bundle loads them as a few files and
// halves the CPU of every start (docs/internals/test-suite.md). The other dependencies stay packages,
// loaded as installed: native bindings (lmdb, uWebSockets.js) and those whose files are found by path
// at run time (pino's transports). The rest of dist/src stays tsc's output (the client, the types).

import { build } from 'esbuild'
import { readFileSync, rmSync } from 'node:fs'

const ROOT = new URL('../../', import.meta.url).pathname

/** The packages made part of the bundle: many small files each, nothing loaded by path. */
const BUNDLED = new Set(['typebox', 'undici'])

const manifest = JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as { dependencies: Record<string, string> }
const external = Object.keys(manifest.dependencies).filter(name => !BUNDLED.has(name))

rmSync(`${ROOT}dist/src/chunks`, { recursive: true, force: true })
await build({
  absWorkingDir: ROOT,
  entryPoints: ['src/main.ts', 'src/cli.ts'],
  outdir: 'dist/src',
  chunkNames: 'chunks/[name]-[hash]',
  bundle: true,
  // The command line loads the server (`beacon start`) and its commands' modules when it runs them.
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  external,
  // Where the CommonJS bundled here calls require() for a Node built-in.
  banner: { js: "import { createRequire as __beaconRequire } from 'node:module'; const require = __beaconRequire(import.meta.url);" },
  sourcemap: true,
  allowOverwrite: true,
  logLevel: 'warning',
})
