import { expect } from 'chai'
import { mkdirSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { removeDir, tempDir } from '../helpers/beacon.js'
import { findCycles, layerProblems, readImportGraph, type Layer } from './import-graph.js'

// The layers of src/ and actors/, highest first. A file may import files of its own rank or lower,
// never higher; no file may be part of an import cycle. docs/architecture.md explains the table.
export const LAYERS: readonly Layer[] = [
  // The composition root: the process entry points and the wiring of everything.
  { rank: 7, name: 'entry', paths: ['src/main.ts', 'src/start.ts', 'src/app.ts', 'src/cluster-mode.ts', 'src/cli.ts', 'src/build-assets.ts', 'src/build-server.ts', 'src/panel-bundle.ts'] },
  // The surfaces: the HTTP API, operations (health, metrics, OpenAPI, logs), the command line, and
  // the browser bundles (built by esbuild, never imported by the server).
  { rank: 6, name: 'surface', paths: ['src/http/', 'src/ops/', 'src/cli/', 'src/client/', 'src/sdk/', 'src/panel/'] },
  { rank: 5, name: 'actors', paths: ['actors/', 'src/jobs/'] },
  // The catalogs: one per configuration kind (accounts, tokens, event types, campaigns, segments,
  // webhooks), kept in memory, written through to storage, compiled with the rules and delivery below.
  { rank: 4, name: 'catalog', paths: ['src/catalog/'] },
  { rank: 3, name: 'rules', paths: ['src/matching/', 'src/segments/'] },
  // Delivery: the webhook definitions (validation, compiling, rendering, sending) and the delivery
  // module that moves outbox rows to them (the hub, the queues, the workers, the JetStream transport).
  { rank: 2, name: 'delivery', paths: ['src/delivery/', 'src/webhooks/', 'src/destinations/'] },
  // Storage knows LMDB and its records, nothing of campaigns, segments or webhooks; beside it the
  // cluster's building blocks over NATS (partitions, leases, changelogs, configuration records), and
  // the panel's own records: users and sessions, the audit log, media, report counters.
  { rank: 1, name: 'storage', paths: ['src/store/', 'src/cluster/', 'src/users/', 'src/audit/', 'src/media/', 'src/reports/'] },
  // Foundations every layer may use.
  { rank: 0, name: 'base', paths: ['src/errors.ts', 'src/assert.ts', 'src/clock.ts', 'src/log.ts', 'src/config.ts', 'src/admin-key.ts', 'src/patterns.ts', 'src/validator.ts', 'src/listeners.ts', 'src/fields-except.ts', 'src/package-root.ts', 'src/auth/', 'src/stats/'] },
]

// Known upward imports: debts the layout refactor (issue 16) removes. Nothing may be added here; an
// entry whose import is gone must be deleted (the test fails until it is), so the list only shrinks.
export const ALLOWED_UPWARD: readonly string[] = []

const ROOT = new URL('../..', import.meta.url).pathname

describe('layers: dependencies point one way', () => {
  it('src/ and actors/ import only their own layer or lower ones, with no cycle (known debts allowlisted)', () => {
    const edges = readImportGraph(ROOT, ['src', 'actors'])
    expect(edges.length, 'the graph was read').to.be.above(100)
    expect(layerProblems(edges, LAYERS, ALLOWED_UPWARD)).to.deep.equal([])
  })

  describe('the checker itself, on a folder of tiny files', () => {
    let root: string
    const layers: Layer[] = [
      { rank: 2, name: 'top', paths: ['src/top/'] },
      { rank: 1, name: 'middle', paths: ['src/middle/'] },
      { rank: 0, name: 'bottom', paths: ['src/bottom.ts'] },
    ]
    const write = (files: Record<string, string>): void => {
      for (const [path, text] of Object.entries(files)) {
        mkdirSync(dirname(join(root, path)), { recursive: true })
        writeFileSync(join(root, path), text)
      }
    }
    beforeEach(() => {
      root = tempDir('beacon-layers-')
      write({
        'src/top/a.ts': "import { m } from '../middle/m.js'\nexport const a = m\n",
        'src/middle/m.ts': "import type { B } from '../bottom.js'\nexport const m: B = 1\n",
        'src/bottom.ts': 'export type B = number\n',
      })
    })
    afterEach(() => removeDir(root))

    it('passes a graph that points down', () => {
      const edges = readImportGraph(root, ['src'])
      expect(edges).to.deep.equal([
        { from: 'src/middle/m.ts', to: 'src/bottom.ts' },
        { from: 'src/top/a.ts', to: 'src/middle/m.ts' },
      ])
      expect(layerProblems(edges, layers, [])).to.deep.equal([])
    })

    it('catches an upward import, a type-only one and a re-export included', () => {
      write({
        'src/bottom.ts': "import type { a } from './top/a.js'\nexport type B = typeof a\n",
        'src/middle/n.ts': "export * from '../top/a.js'\n",
      })
      const problems = layerProblems(readImportGraph(root, ['src']), layers, [])
      expect(problems).to.include('upward import: src/bottom.ts -> src/top/a.ts (bottom, rank 0, imports top, rank 2)')
      expect(problems).to.include('upward import: src/middle/n.ts -> src/top/a.ts (middle, rank 1, imports top, rank 2)')
    })

    it('lets an allowlisted upward import pass, and fails once it is gone', () => {
      write({ 'src/middle/up.ts': "const a = await import('../top/a.js')\nexport const up = a\n" })
      const allowed = ['src/middle/up.ts -> src/top/a.ts']
      expect(layerProblems(readImportGraph(root, ['src']), layers, allowed)).to.deep.equal([])
      write({ 'src/middle/up.ts': 'export const up = 1\n' })
      expect(layerProblems(readImportGraph(root, ['src']), layers, allowed)).to.deep.equal([
        'allowlisted upward import no longer exists (or no longer runs upward): src/middle/up.ts -> src/top/a.ts; delete it from the allowlist',
      ])
    })

    it('resolves .tsx files and folder imports, so a cycle through them is seen', () => {
      write({
        'src/top/view.tsx': "import { b } from './b'\nexport const view = b\n",
        'src/top/b/index.ts': "import { view } from '../view.js'\nexport const b = 1\nexport const again = view\n",
      })
      expect(layerProblems(readImportGraph(root, ['src']), layers, [])).to.deep.equal(['import cycle: src/top/b/index.ts -> src/top/view.tsx -> src/top/b/index.ts'])
    })

    it('catches a cycle inside one layer', () => {
      write({
        'src/middle/m.ts': "import { n } from './n.js'\nexport const m = n\n",
        'src/middle/n.ts': "import { o } from './o.js'\nexport const n = o\n",
        'src/middle/o.ts': "import type { m } from './m.js'\nexport const o = 1 as unknown as typeof m\n",
      })
      const edges = readImportGraph(root, ['src'])
      expect(findCycles(edges)).to.deep.equal([['src/middle/m.ts', 'src/middle/n.ts', 'src/middle/o.ts', 'src/middle/m.ts']])
      expect(layerProblems(edges, layers, [])).to.deep.equal(['import cycle: src/middle/m.ts -> src/middle/n.ts -> src/middle/o.ts -> src/middle/m.ts'])
    })

    it('names a file that belongs to no layer', () => {
      write({ 'src/elsewhere/x.ts': "import { m } from '../middle/m.js'\nexport const x = m\n" })
      expect(layerProblems(readImportGraph(root, ['src']), layers, [])).to.deep.equal([
        'src/elsewhere/x.ts is in no layer: add its folder to the rank table (test/architecture/layers.test.ts and docs/architecture.md)',
      ])
    })
  })
})
