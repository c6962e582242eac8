// Docs that stay true to the tree: each document has one title (one H1 outside code blocks), and every
// repository path named in the docs or in the comments of src/ and actors/ exists (a `.js` specifier
// names its `.ts` source). A file moved or deleted without its mentions fails here.

import { expect } from 'chai'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'

const ROOT = new URL('../../', import.meta.url).pathname
const DOCS = ['README.md', 'bench/README.md', ...readdirSync(join(ROOT, 'docs')).filter(name => name.endsWith('.md')).map(name => `docs/${name}`)]
const PATH = /(?<![\w/.@-])(?:src|actors|test|bench|scripts|docs)\/[\w./-]*[\w-]/g

function filesUnder (dir: string): string[] {
  return readdirSync(join(ROOT, dir)).flatMap(name => {
    const path = `${dir}/${name}`
    return statSync(join(ROOT, path)).isDirectory() ? filesUnder(path) : /\.tsx?$/.test(name) ? [path] : []
  })
}

function exists (path: string): boolean {
  const bare = path.replace(/\.js$/, '')
  return [path, `${bare}.ts`, `${bare}.tsx`].some(candidate => existsSync(join(ROOT, candidate)))
}

describe('docs', () => {
  it('have one H1 each', () => {
    for (const doc of DOCS) {
      let fenced = false
      let titles = 0
      for (const line of readFileSync(join(ROOT, doc), 'utf8').split('\n')) {
        if (line.startsWith('```')) fenced = !fenced
        else if (!fenced && line.startsWith('# ')) titles++
      }
      expect(titles, doc).to.equal(1)
    }
  })

  it('name only paths that exist, in the docs and in the comments of src/ and actors/', () => {
    const missing: string[] = []
    for (const file of [...DOCS, ...filesUnder('src'), ...filesUnder('actors')]) {
      const text = readFileSync(join(ROOT, file), 'utf8')
      for (const [path] of text.matchAll(PATH)) if (!exists(path)) missing.push(`${file}: ${path}`)
    }
    expect(missing).to.deep.equal([])
  })
})
