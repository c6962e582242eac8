import { expect } from 'chai'
import { compileGlob, globMatch, globProblem, globWork } from '../../src/matching/glob.js'
import { compileCampaigns, type CampaignInput, type MatchContext } from '../../src/matching/index.js'
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

  it('agrees with the reference on random patterns with long runs of ? and literals, astral characters included', () => {
    let seed = 7
    const random = (n: number): number => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n }
    const letters = ['a', 'b', '😀']
    for (let round = 0; round < 400; round++) {
      let pattern = ''
      const length = 1 + random(80)
      for (let i = 0; i < length; i++) pattern += random(10) === 0 ? '*' : random(6) === 0 ? '?' : letters[random(letters.length)] as string
      let s = ''
      const n = random(120)
      for (let i = 0; i < n; i++) s += letters[random(random(5) === 0 ? 3 : 2)] as string
      matches(pattern, s)
      // A subject built from the pattern itself, so that long pieces do occur.
      matches(pattern, pattern.replaceAll('?', 'b').replaceAll('*', 'ab'))
    }
  })

  // issue 27: `*` + 253 × `a` + `?b` was length × pattern (0.5 M steps a pattern on a 2,048-character path).
  it('matches in work linear in the subject, the issue\'s attack and its variants included', () => {
    const path = 'a'.repeat(2048)
    const attacks = ['*' + 'a'.repeat(253) + '?b', '*' + 'a'.repeat(252) + '?b*', '*a*' + 'a'.repeat(250) + '?b*', '*' + 'a?'.repeat(127) + '*', '*a*a*a*a*a*a*a*a*b']
    for (const pattern of attacks) {
      const test = compileGlob(pattern)
      const before = globWork.steps
      expect(test(path), pattern).to.equal(simpleGlob(pattern, path))
      const steps = globWork.steps - before
      // ⌈piece / 32⌉ words of state a character (8 at most) plus each piece's own length: linear.
      expect(steps, `${pattern.slice(0, 12)}…: ${steps} steps`).to.be.at.most(8 * path.length + 2 * pattern.length)
    }
  })

  it('answers the issue\'s campaigns (10 × 100 trigger paths of the attack) within a linear number of steps', () => {
    const campaigns: CampaignInput[] = Array.from({ length: 10 }, (_, c) => ({
      id: `c${c}`,
      def: { name: `c${c}`, status: 'active', priority: 1, trigger: { events: ['pageView'], paths: Array.from({ length: 100 }, (_, i) => '*' + 'a'.repeat(253 - String(i).length) + String(i) + '?b') }, content: {} },
    }))
    const set = compileCampaigns(campaigns)
    const context = (path: string): MatchContext => ({
      event: { event: 'pageView', platform: 'web', path },
      attributes: {},
      segments: new Set(),
      visitor: { pageViews: 1, productViews: 0, purchases: 0, totalSpent: 0, firstSeenMs: 0, lastSeenMs: 0, viewedSkus: [], purchasedSkus: [], viewedCategories: [] },
      nowMs: 0,
    })
    expect(set.match(context('x' + 'a'.repeat(252) + '7' + 'xb')).map(m => m.id), 'a path the patterns match').to.have.length(10)
    const before = globWork.steps
    expect(set.match(context('a'.repeat(2048)))).to.deep.equal([])
    // 1,000 patterns of 256 characters: at most their own length each (the last piece is compared at
    // the end), where the scan took a whole path × pattern (about 500 M steps in all).
    expect(globWork.steps - before).to.be.at.most(1000 * 256 * 2)
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
