// `npm start` runs scripts/build-if-stale.mjs: the build runs only when its inputs changed. Tested in
// a scratch package whose "build" script counts its runs (the real build is what `npm test` runs).

import { expect } from 'chai'
import { spawnSync } from 'node:child_process'
import { copyFileSync, mkdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { removeDir, tempDir } from '../helpers/beacon.js'

const SCRIPT = new URL('../../scripts/build-if-stale.mjs', import.meta.url).pathname

describe('npm start builds only when sources changed', () => {
  it('builds on the first start, skips while nothing changed, builds again after a source, a new file or a tsconfig changes', () => {
    const root = tempDir('beacon-build-')
    try {
      mkdirSync(join(root, 'scripts'))
      mkdirSync(join(root, 'src', 'sdk'), { recursive: true })
      copyFileSync(SCRIPT, join(root, 'scripts', 'build-if-stale.mjs'))
      writeFileSync(join(root, 'package.json'), JSON.stringify({ type: 'module', scripts: { build: 'node build.mjs' } }))
      writeFileSync(join(root, 'build.mjs'), "import fs from 'node:fs'\nfs.mkdirSync('dist/src', { recursive: true })\nfs.writeFileSync('dist/src/main.js', '')\nfs.appendFileSync('builds.log', 'x')\n")
      writeFileSync(join(root, 'tsconfig.json'), '{}')
      writeFileSync(join(root, 'src', 'main.ts'), 'export {}')
      writeFileSync(join(root, 'src', 'sdk', 'index.ts'), 'export {}')
      const start = (): number => {
        const run = spawnSync(process.execPath, ['scripts/build-if-stale.mjs'], { cwd: root, encoding: 'utf8' })
        expect(run.status, run.stderr).to.equal(0)
        return readFileSync(join(root, 'builds.log'), 'utf8').length
      }
      expect(start()).to.equal(1)
      expect(start()).to.equal(1)
      const later = new Date(Date.now() + 5_000)
      utimesSync(join(root, 'src', 'sdk', 'index.ts'), later, later)
      expect(start()).to.equal(2)
      expect(start()).to.equal(2)
      writeFileSync(join(root, 'src', 'added.ts'), 'export {}')
      expect(start()).to.equal(3)
      writeFileSync(join(root, 'tsconfig.json'), '{ }')
      expect(start()).to.equal(4)
      rmSync(join(root, 'dist', 'src', 'main.js'))
      expect(start()).to.equal(5)
      expect(start()).to.equal(5)
    } finally {
      removeDir(root)
    }
  })
})
