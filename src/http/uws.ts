// Which uWebSockets.js native binding this process runs on. Two builds are installed as npm aliases
// (package.json), each a directory of binaries named by platform, CPU and Node ABI
// (process.versions.modules):
//
//   uWebSockets.js  @btc-vision/uwebsockets.js 20.57.0, upstream's v20.57.0 republished: Node 20, 22,
//                   24, 25 (ABI 115/127/137/141); its Linux binaries need glibc >= 2.38 (Debian 13,
//                   Ubuntu 24.04).
//   uws-bookworm    @trufflesuite/uws-js-unofficial 20.30: Node 16, 18, 20 (ABI 93/108/115) on glibc
//                   2.36 (Debian 12 and its Node 20).
//
// The first build in BUILDS with a binary for the running ABI that loads is the one used. The binary is
// loaded directly, never through the package's own entry point: the trufflesuite one falls back to a
// JavaScript server (an old `ws`) when its binary does not load, a server slower and different in what it
// accepts. When no binary loads, loadUws() throws UwsUnavailableError, whose message is one line saying
// why for each build. Swapping a build is its line in package.json (same alias, other version or
// package), as long as the binaries keep their place in the package (`dir` below).

import { createRequire } from 'node:module'
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import type * as uWS from 'uWebSockets.js'

export type UwsBinding = typeof uWS

interface Build {
  /** The npm alias in package.json. */
  readonly alias: string
  /** Where the binaries are inside the package. */
  readonly dir: string
}

const BUILDS: readonly Build[] = [
  { alias: 'uWebSockets.js', dir: '' },
  { alias: 'uws-bookworm', dir: 'binaries' },
]

/** The binding in use: which package, which version, which file. */
export interface UwsBuild {
  readonly alias: string
  readonly package: string
  readonly version: string
  readonly file: string
}

export class UwsUnavailableError extends Error {
  override readonly name = 'UwsUnavailableError'
}

/** What the binary's file name is made of; the running process's by default. */
export interface Runtime {
  readonly platform: string
  readonly arch: string
  readonly abi: string
  readonly node: string
}

/**
 * The most a request's line and headers may take, in bytes: 16 KiB, Node's own HTTP default. 20.57's
 * default is 4 KiB (a longer request head is answered 431); 20.30 takes up to about 64 KiB whatever
 * this says. uWebSockets.js reads it from the environment once, when its binary loads; an operator's
 * UWS_HTTP_MAX_HEADERS_SIZE wins.
 */
const MAX_HEADERS_BYTES = '16384'

const require = createRequire(import.meta.url)
let loaded: { binding: UwsBinding, build: UwsBuild } | null = null

/** The uWebSockets.js binding for this process (loaded once); throws UwsUnavailableError when none loads. */
export function loadUws (): UwsBinding {
  loaded ??= pickUws(thisRuntime())
  return loaded.binding
}

/** Which build loadUws() loaded (null before it did). */
export function uwsBuild (): UwsBuild | null {
  return loaded?.build ?? null
}

export function thisRuntime (): Runtime {
  return { platform: process.platform, arch: process.arch, abi: process.versions.modules, node: process.version }
}

/** Load the first build with a binary for `runtime` that loads (exported for tests: any runtime may be asked). */
export function pickUws (runtime: Runtime): { binding: UwsBinding, build: UwsBuild } {
  process.env.UWS_HTTP_MAX_HEADERS_SIZE ??= MAX_HEADERS_BYTES
  const reasons: string[] = []
  for (const build of BUILDS) {
    const pkg = packageOf(build.alias)
    if (pkg === null) {
      reasons.push(`${build.alias}: not installed`)
      continue
    }
    const label = `${pkg.name} ${pkg.version}`
    const file = join(pkg.dir, build.dir, `uws_${runtime.platform}_${runtime.arch}_${runtime.abi}.node`)
    if (!existsSync(file)) {
      reasons.push(`${label}: no binary for ABI ${runtime.abi}`)
      continue
    }
    try {
      const binding = require(file) as UwsBinding
      return { binding, build: { alias: build.alias, package: pkg.name, version: pkg.version, file } }
    } catch (error) {
      reasons.push(`${label}: ${oneLine(error)}`)
    }
  }
  throw new UwsUnavailableError(`no uWebSockets.js native binding loads on Node ${runtime.node} ` +
    `(ABI ${runtime.abi}, ${runtime.platform}-${runtime.arch}): ${reasons.join('; ')}. ` +
    'Beacon runs on Node 24 (glibc >= 2.38) and on Node 20: see docs/operations.md')
}

/** The installed package behind an alias: its folder, name and version; null when it is not installed. */
function packageOf (alias: string): { dir: string, name: string, version: string } | null {
  let entry: string
  try {
    entry = require.resolve(alias)
  } catch {
    return null
  }
  // The entry point is in the package's folder or below it; package.json marks the folder (a package's
  // `exports` may not list package.json, so it is found on disk rather than resolved).
  for (let dir = dirname(entry); dir !== dirname(dir); dir = dirname(dir)) {
    const file = join(dir, 'package.json')
    if (existsSync(file)) {
      const json = JSON.parse(readFileSync(file, 'utf8')) as { name?: string, version?: string }
      return { dir, name: json.name ?? alias, version: json.version ?? '?' }
    }
  }
  return null
}

function oneLine (error: unknown): string {
  const text = error instanceof Error ? error.message : String(error)
  return text.replace(/\s*\n\s*/g, ' ').replace(/[.\s]+$/, '')
}
