// Beacon's version, from its package.json: found by walking up from this file, which sits at a
// different depth when built (dist/src/ops) than when run from source (src/ops).

import { readFileSync } from 'node:fs'

const PACKAGE_NAME = 'beacon'
const LEVELS_MAX = 5

function readVersion (): string {
  let dir = new URL('.', import.meta.url)
  for (let level = 0; level < LEVELS_MAX; level++) {
    dir = new URL('..', dir)
    try {
      const pkg = JSON.parse(readFileSync(new URL('package.json', dir), 'utf8')) as { name?: string, version?: string }
      if (pkg.name === PACKAGE_NAME && typeof pkg.version === 'string') return pkg.version
    } catch {}
  }
  return '0.0.0'
}

export const VERSION = readVersion()
