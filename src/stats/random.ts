// A seeded random source for simulations and for the bandit's Monte Carlo (so a reweighting is
// reproducible from its inputs). The generator is sfc32 (Chris Doty-Humphrey's Small Fast Counting
// generator, 128-bit state, passes PractRand), seeded through splitmix32.

export interface Random {
  /** Uniform on [0, 1). */
  next (): number
  /** Standard normal. */
  normal (): number
  /** Gamma(shape, 1), shape > 0. */
  gamma (shape: number): number
  /** Beta(a, b), a, b > 0. */
  beta (a: number, b: number): number
  /** Binomial(n, p). */
  binomial (n: number, p: number): number
}

function splitmix32 (seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state + 0x9e3779b9) >>> 0
    let z = state
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b)
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35)
    return (z ^ (z >>> 16)) >>> 0
  }
}

export function seededRandom (seed: number): Random {
  const init = splitmix32(seed)
  let a = init()
  let b = init()
  let c = init()
  let d = init()
  let spareNormal = NaN

  function next (): number {
    const t = (((a + b) >>> 0) + d) >>> 0
    d = (d + 1) >>> 0
    a = b ^ (b >>> 9)
    b = (c + (c << 3)) >>> 0
    c = (c << 21) | (c >>> 11)
    c = (c + t) >>> 0
    return t / 4294967296
  }

  // Marsaglia's polar method; the second value of each pair is kept for the next call.
  function normal (): number {
    if (!Number.isNaN(spareNormal)) {
      const value = spareNormal
      spareNormal = NaN
      return value
    }
    let u: number, v: number, s: number
    do {
      u = 2 * next() - 1
      v = 2 * next() - 1
      s = u * u + v * v
    } while (s >= 1 || s === 0)
    const factor = Math.sqrt(-2 * Math.log(s) / s)
    spareNormal = v * factor
    return u * factor
  }

  // Marsaglia and Tsang (2000); shape < 1 through Gamma(shape + 1) · U^(1/shape).
  function gamma (shape: number): number {
    if (shape < 1) return gamma(shape + 1) * Math.pow(1 - next(), 1 / shape)
    const d3 = shape - 1 / 3
    const c3 = 1 / Math.sqrt(9 * d3)
    for (;;) {
      let x: number, v: number
      do {
        x = normal()
        v = 1 + c3 * x
      } while (v <= 0)
      v = v * v * v
      const u = 1 - next()
      if (u < 1 - 0.0331 * x * x * x * x) return d3 * v
      if (Math.log(u) < 0.5 * x * x + d3 * (1 - v + Math.log(v))) return d3 * v
    }
  }

  function beta (alpha: number, betaShape: number): number {
    const x = gamma(alpha)
    return x / (x + gamma(betaShape))
  }

  // Inversion by the recurrence of the probabilities (exact; its cost grows with n·p). A large n is
  // drawn as a sum of chunks small enough that (1 − p)^chunk does not underflow.
  function binomial (n: number, p: number): number {
    if (p > 0.5) return n - binomial(n, 1 - p)
    if (p <= 0 || n <= 0) return 0
    const chunk = Math.max(1, Math.floor(600 / -Math.log1p(-p)))
    let total = 0
    for (let left = n; left > 0; left -= chunk) total += binomialInversion(Math.min(left, chunk), p)
    return total
  }

  function binomialInversion (n: number, p: number): number {
    const q = 1 - p
    const ratio = p / q
    let probability = Math.pow(q, n)
    let cumulative = probability
    const u = next()
    let k = 0
    while (u > cumulative && k < n) {
      probability *= ratio * (n - k) / (k + 1)
      cumulative += probability
      k++
    }
    return k
  }

  return { next, normal, gamma, beta, binomial }
}
