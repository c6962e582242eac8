// Beacon's package folder (where its package.json is), found by walking up from this file: it sits at
// a different depth in the sources (src/), the tsc output (dist/src/) and the server bundle
// (dist/src/chunks/, src/build-server.ts). Files Beacon serves or reads beside its code (dist/web/…)
// are found from here.

import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const PACKAGE_NAME = 'beacon'
const LEVELS_MAX = 5

/** The package's folder, with a trailing slash, and its version ('0.0.0' when no package.json names Beacon). */
function findPackage (): { root: string, version: string } {
  let dir = new URL('.', import.meta.url)
  for (let level = 0; level < LEVELS_MAX; level++) {
    dir = new URL('..', dir)
    try {
      const pkg = JSON.parse(readFileSync(new URL('package.json', dir), 'utf8')) as { name?: string, version?: string }
      if (pkg.name === PACKAGE_NAME && typeof pkg.version === 'string') return { root: fileURLToPath(dir), version: pkg.version }
    } catch {}
  }
  return { root: fileURLToPath(new URL('..', import.meta.url)), version: '0.0.0' }
}

const found = findPackage()

export const PACKAGE_ROOT = found.root
/** Beacon's version, from its package.json. */
export const VERSION = found.version
