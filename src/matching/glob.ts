// Glob patterns: `*` matches any run of characters (including none), `?` exactly one character
// (one Unicode code point), everything else itself; the whole string must match. There is no
// escape syntax.
//
// Matching is linear in the subject, never a RegExp and never a backtracking scan (a two-pointer
// scan that backs up to the last `*` is length × pattern: `*` + 253 `a` + `?b*` against 2,048
// characters took 0.5 M steps, issue 27). The pattern is split on `*` into pieces of literal
// characters and `?`, and the pieces are placed left to right:
// - the first piece is compared at the start and the last at the end (each once, its own length);
// - every piece between is placed at its earliest occurrence after the previous one (earliest end:
//   leaving the most room for the rest can only help), found with indexOf when it is all literal, or
//   with a bit-parallel shift-and scan over code points when it has `?`: one pass over the subject,
//   ⌈piece / 32⌉ words of state per character (at most 8 for the 256-character pattern limit).
// Each character of the subject is looked at by one piece's search at most, so the work is
// O(subject × ⌈piece / 32⌉), and `globWork.steps` counts it (tests assert on it, never on time).

export const GLOB_LENGTH_MAX = 256

/**
 * Subjects longer than this never match a glob (a documented limit: the longest string a request can
 * carry is an attribute value of 4,096 characters; paths, referrers and event fields are 2,048).
 */
export const GLOB_SUBJECT_LENGTH_MAX = 4096

export type StringTest = (s: string) => boolean

/** Characters (times state words) the matcher looked at since the process started: a work counter for tests. */
export const globWork = { steps: 0 }

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

const ANY = -1
const OTHER_ROW = 128

// Width in code units of the code point starting at `i` (2 for a surrogate pair).
function width (s: string, i: number): number {
  const c = s.charCodeAt(i)
  if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
    const d = s.charCodeAt(i + 1)
    if (d >= 0xdc00 && d <= 0xdfff) return 2
  }
  return 1
}

// Width in code units of the code point ending just before `end` (2 for a surrogate pair).
function widthBefore (s: string, end: number): number {
  const d = s.charCodeAt(end - 1)
  if (d >= 0xdc00 && d <= 0xdfff && end >= 2) {
    const c = s.charCodeAt(end - 2)
    if (c >= 0xd800 && c <= 0xdbff) return 2
  }
  return 1
}

function codePointAt (s: string, i: number, w: number): number {
  return w === 1 ? s.charCodeAt(i) : (s.codePointAt(i) as number)
}

/** A run of the pattern between stars: code points, ANY for `?`. */
class Piece {
  readonly points: number[]
  /** The piece itself when it has no `?` (searched with indexOf), else null. */
  readonly literal: string | null
  /** The literal characters the piece starts with (a quick skip for the shift-and scan). */
  readonly lead: string
  readonly words: number
  /**
   * Masks, `words` words a row: bit j of a row set where point j accepts the row's code point. Rows
   * 0–127 are ASCII, row 128 any code point not in the piece, then one row per other code point in it.
   */
  private readonly table: Int32Array
  private readonly wideRows: Map<number, number>
  private readonly state: Int32Array

  constructor (text: string) {
    this.points = Array.from(text, ch => ch === '?' ? ANY : ch.codePointAt(0) as number)
    this.literal = text.includes('?') ? null : text
    this.lead = literalPrefix(text)
    const k = this.points.length
    const words = this.words = Math.max(1, Math.ceil(k / 32))
    this.wideRows = new Map()
    for (const p of this.points) if (p >= 128 && !this.wideRows.has(p)) this.wideRows.set(p, OTHER_ROW + 1 + this.wideRows.size)
    const rows = OTHER_ROW + 1 + this.wideRows.size
    const table = this.table = new Int32Array(rows * words)
    this.points.forEach((p, j) => {
      const bit = 1 << (j & 31)
      if (p === ANY) {
        for (let row = 0; row < rows; row++) table[row * words + (j >>> 5)]! |= bit
      } else {
        table[this.row(p) * words + (j >>> 5)]! |= bit
      }
    })
    this.state = new Int32Array(words)
  }

  private row (c: number): number {
    return c < 128 ? c : this.wideRows.get(c) ?? OTHER_ROW
  }

  /** Where the piece ends when placed at `i`, or -1. */
  matchAt (s: string, i: number): number {
    const points = this.points
    globWork.steps += points.length
    for (let j = 0; j < points.length; j++) {
      if (i >= s.length) return -1
      const w = width(s, i)
      const p = points[j] as number
      if (p !== ANY && p !== codePointAt(s, i, w)) return -1
      i += w
    }
    return i
  }

  /** Where the piece starts when it ends at `end`, or -1. */
  matchBefore (s: string, end: number): number {
    const points = this.points
    globWork.steps += points.length
    for (let j = points.length - 1; j >= 0; j--) {
      if (end <= 0) return -1
      const w = widthBefore(s, end)
      const p = points[j] as number
      if (p !== ANY && p !== codePointAt(s, end - w, w)) return -1
      end -= w
    }
    return end
  }

  /** The end of the piece's earliest-ending occurrence within [from, limit), or -1. */
  find (s: string, from: number, limit: number): number {
    if (this.literal !== null) {
      const at = s.indexOf(this.literal, from)
      globWork.steps += (at === -1 ? limit : at) - from + this.literal.length
      return at === -1 || at + this.literal.length > limit ? -1 : at + this.literal.length
    }
    return this.words === 1 ? this.scanOneWord(s, from, limit) : this.scanWords(s, from, limit)
  }

  private scanOneWord (s: string, from: number, limit: number): number {
    const top = 1 << (this.points.length - 1)
    const table = this.table
    let d = 0
    let i = from
    let steps = 0
    while (i < limit) {
      if (d === 0 && this.lead.length > 0) {
        const at = s.indexOf(this.lead, i)
        steps += (at === -1 ? limit : at) - i
        if (at === -1 || at >= limit) break
        i = at
      }
      const w = width(s, i)
      const c = codePointAt(s, i, w)
      d = ((d << 1) | 1) & (table[this.row(c)] as number)
      i += w
      steps++
      if ((d & top) !== 0) {
        globWork.steps += steps
        return i
      }
    }
    globWork.steps += steps
    return -1
  }

  private scanWords (s: string, from: number, limit: number): number {
    const words = this.words
    const last = words - 1
    const top = 1 << ((this.points.length - 1) & 31)
    const table = this.table
    const d = this.state
    d.fill(0)
    let live = 0
    let i = from
    let steps = 0
    while (i < limit) {
      if (live === 0 && this.lead.length > 0) {
        const at = s.indexOf(this.lead, i)
        steps += (at === -1 ? limit : at) - i
        if (at === -1 || at >= limit) break
        i = at
      }
      const w = width(s, i)
      const c = codePointAt(s, i, w)
      const row = this.row(c) * words
      let carry = 1
      live = 0
      for (let k = 0; k < words; k++) {
        const old = d[k] as number
        const next = ((old << 1) | carry) & (table[row + k] as number)
        carry = old >>> 31
        d[k] = next
        live |= next
      }
      i += w
      steps += words
      if (((d[last] as number) & top) !== 0) {
        globWork.steps += steps
        return i
      }
    }
    globWork.steps += steps
    return -1
  }
}

/** Matches any pattern: the pieces between stars placed first, last, then earliest in between. */
function compilePieces (pattern: string): StringTest {
  const pieces = pattern.split('*').map(text => new Piece(text))
  const first = pieces[0] as Piece
  if (pieces.length === 1) return s => s.length <= GLOB_SUBJECT_LENGTH_MAX && first.matchAt(s, 0) === s.length
  const last = pieces[pieces.length - 1] as Piece
  const middle = pieces.slice(1, -1).filter(p => p.points.length > 0)
  return s => {
    if (s.length > GLOB_SUBJECT_LENGTH_MAX) return false
    let i = first.points.length === 0 ? 0 : first.matchAt(s, 0)
    if (i === -1) return false
    const limit = last.points.length === 0 ? s.length : last.matchBefore(s, s.length)
    if (limit < i) return false
    for (const piece of middle) {
      i = piece.find(s, i, limit)
      if (i === -1) return false
    }
    return true
  }
}

/** Whether `s` matches `pattern` (compiles the pattern each call: for tests and one-off checks). */
export function globMatch (pattern: string, s: string): boolean {
  return compilePieces(pattern)(s)
}

/** A tester specialised to the pattern's shape; the common shapes use one string method. */
export function compileGlob (pattern: string): StringTest {
  if (!pattern.includes('?')) {
    const parts = pattern.split('*')
    const max = GLOB_SUBJECT_LENGTH_MAX
    if (parts.length === 1) return s => s === pattern
    if (parts.length === 2) {
      const head = parts[0] as string
      const tail = parts[1] as string
      if (tail === '') return head === '' ? s => s.length <= max : s => s.length <= max && s.startsWith(head)
      if (head === '') return s => s.length <= max && s.endsWith(tail)
      const min = head.length + tail.length
      return s => s.length >= min && s.length <= max && s.startsWith(head) && s.endsWith(tail)
    }
    if (parts.length === 3 && parts[0] === '' && parts[2] === '') {
      const mid = parts[1] as string
      return s => s.length <= max && s.includes(mid)
    }
  }
  return compilePieces(pattern)
}
