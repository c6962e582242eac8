import { expect } from 'chai'
import { compileGlob, globMatch, globProblem } from '../../src/matching/glob.js'
import { simpleGlob } from './reference.js'

// The compiled tester (fast paths), the linear scan and the reference DP must all agree.
function matches (pattern: string, s: string): boolean {
  const compiled = compileGlob(pattern)(s)
  expect(globMatch(pattern, s), `scan: ${pattern} ~ ${s}`).to.equal(compiled)
  expect(simpleGlob(pattern, s), `reference: ${pattern} ~ ${s}`).to.equal(compiled)
  return compiled
}

describe('glob', () => {
  it('matches a literal pattern only against the identical string', () => {
    expect(matches('/cart', '/cart')).to.equal(true)
    expect(matches('/cart', '/cart/')).to.equal(false)
    expect(matches('/cart', '/car')).to.equal(false)
  })

  it('lets * match any run of characters, including none and slashes', () => {
    expect(matches('/shoes/*', '/shoes/')).to.equal(true)
    expect(matches('/shoes/*', '/shoes/red/42')).to.equal(true)
    expect(matches('/shoes/*', '/shoes')).to.equal(false)
    expect(matches('*.html', '/a/b.html')).to.equal(true)
    expect(matches('*sale*', '/summer-sale/x')).to.equal(true)
    expect(matches('/a*z', '/az')).to.equal(true)
    expect(matches('/a*z', '/a')).to.equal(false)
    expect(matches('*', '')).to.equal(true)
  })

  it('lets ? match exactly one character', () => {
    expect(matches('/p/??', '/p/ab')).to.equal(true)
    expect(matches('/p/??', '/p/a')).to.equal(false)
    expect(matches('/p/??', '/p/abc')).to.equal(false)
  })

  it('counts an astral character as one for ?', () => {
    expect(matches('?', '😀')).to.equal(true)
    expect(matches('a?b', 'a😀b')).to.equal(true)
    expect(matches('??', '😀')).to.equal(false)
    expect(matches('*?', '😀')).to.equal(true)
  })

  it('requires the whole string to match', () => {
    expect(matches('/a/*/c', '/a/b/c/d')).to.equal(false)
    expect(matches('/a/*/c', '/a/b/x/c')).to.equal(true)
  })

  it('backtracks stars correctly', () => {
    expect(matches('*a*b', 'xaxaxb')).to.equal(true)
    expect(matches('*a*b', 'xaxaxbx')).to.equal(false)
    expect(matches('a*b*c', 'abbbcbc')).to.equal(true)
    expect(matches('**?', 'x')).to.equal(true)
  })

  it('treats regular expression characters literally', () => {
    expect(matches('/a.b', '/a.b')).to.equal(true)
    expect(matches('/a.b', '/axb')).to.equal(false)
    expect(matches('(x)+[y]*', '(x)+[y]zzz')).to.equal(true)
  })

  it('stays fast on patterns that make regular expressions backtrack', () => {
    const pattern = '*a*a*a*a*a*a*a*a*b'
    const s = 'a'.repeat(20_000)
    const startMs = performance.now()
    expect(compileGlob(pattern)(s)).to.equal(false)
    expect(performance.now() - startMs).to.be.below(1000)
  })

  it('refuses an empty pattern and one over 256 characters', () => {
    expect(globProblem('')).to.be.a('string')
    expect(globProblem('x'.repeat(257))).to.be.a('string')
    expect(globProblem('x'.repeat(256))).to.equal(null)
  })

  it('agrees with the reference on every short pattern over a tiny alphabet', () => {
    const alphabet = ['a', 'b', '*', '?']
    const words = (n: number, letters: string[]): string[] => n === 0 ? [''] : words(n - 1, letters).flatMap(w => letters.map(l => w + l))
    const patterns = [1, 2, 3, 4].flatMap(n => words(n, alphabet))
    const subjects = [0, 1, 2, 3, 4].flatMap(n => words(n, ['a', 'b']))
    for (const p of patterns) for (const s of subjects) matches(p, s)
  })
})
