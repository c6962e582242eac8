// `npm start` builds only when something the build reads changed since the last build: the sources
// (src/, actors/: TypeScript and the browser bundles' sources), the tsconfigs and the package files.
// A fingerprint of their paths, sizes and modification times is kept in dist/.build-stamp; when it
// matches and dist/src/main.js exists, the start goes straight to node (no tsc, no esbuild).
// Run from the package root (npm does).

import { createHash } from 'node:crypto'
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { spawnSync } from 'node:child_process'

const INPUT_FOLDERS = ['src', 'actors']
const INPUT_FILES = ['package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json']
const STAMP = join('dist', '.build-stamp')
const OUTPUT = join('dist', 'src', 'main.js')

function fingerprint () {
  const hash = createHash('sha256')
  const add = (path) => {
    const stat = statSync(path, { throwIfNoEntry: false })
    hash.update(stat === undefined ? `${path}\0-\n` : `${path}\0${stat.size}\0${stat.mtimeMs}\n`)
  }
  for (const file of INPUT_FILES) add(file)
  for (const folder of INPUT_FOLDERS) {
    if (!existsSync(folder)) continue
    const files = readdirSync(folder, { recursive: true, withFileTypes: true })
      .filter(entry => entry.isFile())
      .map(entry => join(entry.parentPath ?? entry.path, entry.name))
      .sort()
    for (const file of files) add(file)
  }
  return hash.digest('hex')
}

const before = fingerprint()
const stamp = existsSync(STAMP) ? readFileSync(STAMP, 'utf8').trim() : ''
if (stamp === before && existsSync(OUTPUT)) process.exit(0)

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
const run = spawnSync(npm, ['run', 'build', '--silent'], { stdio: 'inherit' })
if (run.status !== 0) process.exit(run.status ?? 1)
// The fingerprint taken before the build: a source saved during it makes the next start build again.
writeFileSync(STAMP, before + '\n')
