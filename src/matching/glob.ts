// Glob patterns: `*` matches any run of characters (including none), `?` exactly one character
// (one Unicode code point), everything else itself; the whole string must match. There is no
// escape syntax. Matching is a linear two-pointer scan, never a RegExp, so a pattern such as
// `*a*a*a*a*b` cannot backtrack catastrophically on long inputs.

export const GLOB_LENGTH_MAX = 256

export type StringTest = (s: string) => boolean

/** An error message, or null when the pattern is acceptable. */
export function globProblem (pattern: string): string | null {
  if (pattern.length === 0) return 'glob pattern is empty'
  if (pattern.length > GLOB_LENGTH_MAX) return `glob pattern is longer than ${GLOB_LENGTH_MAX} characters`
  return null
}

export function hasWildcard (pattern: string): boolean {
  return pattern.includes('*') || pattern.includes('?')
}

/** The characters before the first wildcard. */
export function literalPrefix (pattern: string): string {
  let i = 0
  while (i < pattern.length && pattern[i] !== '*' && pattern[i] !== '?') i++
  return pattern.slice(0, i)
}

// Width in code units of the code point starting at `i` (2 for a surrogate pair).
function width (s: string, i: number): number {
  const c = s.charCodeAt(i)
  if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
    const d = s.charCodeAt(i + 1)
    if (d >= 0xdc00 && d <= 0xdfff) return 2
  }
  return 1
}

/** Greedy scan remembering the last `*`: on a mismatch, let that star eat one more character. */
export function globMatch (pattern: string, s: string): boolean {
  const m = pattern.length
  const n = s.length
  let p = 0
  let i = 0
  let starP = -1
  let starI = 0
  while (i < n) {
    const c = p < m ? pattern.charCodeAt(p) : -1
    if (c === 42 /* * */) {
      starP = p++
      starI = i
    } else if (c === 63 /* ? */) {
      i += width(s, i)
      p++
    } else if (c === s.charCodeAt(i)) {
      i++
      p++
    } else if (starP !== -1) {
      starI += width(s, starI)
      i = starI
      p = starP + 1
    } else {
      return false
    }
  }
  while (p < m && pattern.charCodeAt(p) === 42) p++
  return p === m
}

/** A tester specialised to the pattern's shape; the common shapes avoid the scan entirely. */
export function compileGlob (pattern: string): StringTest {
  if (!pattern.includes('?')) {
    const parts = pattern.split('*')
    if (parts.length === 1) return s => s === pattern
    if (parts.length === 2) {
      const head = parts[0] as string
      const tail = parts[1] as string
      if (tail === '') return head === '' ? () => true : s => s.startsWith(head)
      if (head === '') return s => s.endsWith(tail)
      const min = head.length + tail.length
      return s => s.length >= min && s.startsWith(head) && s.endsWith(tail)
    }
    if (parts.length === 3 && parts[0] === '' && parts[2] === '') {
      const mid = parts[1] as string
      return s => s.includes(mid)
    }
  }
  return s => globMatch(pattern, s)
}
