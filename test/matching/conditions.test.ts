import { expect } from 'chai'
import { compileCondition, type Condition, type MatchContext, type VisitorMetrics } from '../../src/matching/index.js'
import { evaluate } from './reference.js'

const NOW_MS = Date.UTC(2025, 5, 3, 14, 30) // Tuesday 2025-06-03 14:30 UTC

function visitor (over: Partial<VisitorMetrics> = {}): VisitorMetrics {
  return {
    pageViews: 12, productViews: 5, purchases: 1, totalSpent: 99.5,
    firstSeenMs: NOW_MS - 86_400_000, lastSeenMs: NOW_MS - 90_500,
    viewedSkus: ['A1', 'B2'], purchasedSkus: ['A1'], viewedCategories: ['shoes'],
    ...over,
  }
}

function ctx (over: Partial<MatchContext> = {}): MatchContext {
  return {
    event: { event: 'productView', platform: 'web', device: 'mobile', path: '/shoes/red', sku: 'A1', price: 49.9, brand: 'Acme', tags: ['new', 'sale'], gift: false, nothing: null },
    attributes: { plan: 'pro', age: 31, vip: true, interests: ['running', 'hiking'] },
    segments: new Set(['buyers', 'eu']),
    visitor: visitor(),
    nowMs: NOW_MS,
    ...over,
  }
}

// Every assertion goes through both the compiled predicate and the reference interpreter.
function holds (cond: Condition, c: MatchContext = ctx()): boolean {
  const compiled = compileCondition(cond)(c)
  expect(evaluate(cond, c), 'reference interpreter disagrees').to.equal(compiled)
  return compiled
}

const leaf = (fact: string, op: string, value: unknown): Condition => ({ fact, op, value } as unknown as Condition)

describe('conditions: facts', () => {
  it('reads any event body field by name', () => {
    expect(holds(leaf('event.sku', 'eq', 'A1'))).to.equal(true)
    expect(holds(leaf('event.brand', 'eq', 'Acme'))).to.equal(true)
    expect(holds(leaf('event.price', 'gt', 40))).to.equal(true)
  })

  it('reads visitor attributes of every kind', () => {
    expect(holds(leaf('attribute.plan', 'eq', 'pro'))).to.equal(true)
    expect(holds(leaf('attribute.age', 'gte', 31))).to.equal(true)
    expect(holds(leaf('attribute.vip', 'eq', true))).to.equal(true)
    expect(holds(leaf('attribute.interests', 'contains', 'hiking'))).to.equal(true)
  })

  it('reads attribute names that contain dots, colons and dashes', () => {
    const c = ctx({ attributes: { 'loyalty.tier': 3, 'crm:id': 'x-1', 'opt-in': true } })
    expect(holds(leaf('attribute.loyalty.tier', 'gte', 3), c)).to.equal(true)
    expect(holds(leaf('attribute.crm:id', 'eq', 'x-1'), c)).to.equal(true)
    expect(holds(leaf('attribute.opt-in', 'eq', true), c)).to.equal(true)
  })

  it('tests segment membership with contains', () => {
    expect(holds(leaf('segment', 'contains', 'eu'))).to.equal(true)
    expect(holds(leaf('segment', 'contains', 'us'))).to.equal(false)
    expect(holds(leaf('segment', 'contains', 'eu'), ctx({ segments: new Set() }))).to.equal(false)
  })

  it('reads every visitor counter', () => {
    expect(holds(leaf('visitor.pageViews', 'eq', 12))).to.equal(true)
    expect(holds(leaf('visitor.productViews', 'eq', 5))).to.equal(true)
    expect(holds(leaf('visitor.purchases', 'eq', 1))).to.equal(true)
    expect(holds(leaf('visitor.totalSpent', 'eq', 99.5))).to.equal(true)
  })

  it('derives firstSeenSecondsAgo and lastSeenSecondsAgo from nowMs, rounded down', () => {
    expect(holds(leaf('visitor.firstSeenSecondsAgo', 'eq', 86_400))).to.equal(true)
    expect(holds(leaf('visitor.lastSeenSecondsAgo', 'eq', 90))).to.equal(true)
    expect(holds(leaf('visitor.lastSeenSecondsAgo', 'eq', 90), ctx({ nowMs: NOW_MS + 499 }))).to.equal(true)
    expect(holds(leaf('visitor.lastSeenSecondsAgo', 'eq', 91), ctx({ nowMs: NOW_MS + 500 }))).to.equal(true)
  })

  it('reads visitor sku and category lists', () => {
    expect(holds(leaf('visitor.viewedSkus', 'contains', 'B2'))).to.equal(true)
    expect(holds(leaf('visitor.purchasedSkus', 'contains', 'B2'))).to.equal(false)
    expect(holds(leaf('visitor.viewedCategories', 'contains', 'shoes'))).to.equal(true)
  })

  it('derives time.hour and time.weekday in UTC with Sunday as 0', () => {
    expect(holds(leaf('time.hour', 'eq', 14))).to.equal(true)
    expect(holds(leaf('time.weekday', 'eq', 2))).to.equal(true)
    const sunday = Date.UTC(2025, 5, 1, 0, 0)
    expect(holds(leaf('time.weekday', 'eq', 0), ctx({ nowMs: sunday }))).to.equal(true)
    expect(holds(leaf('time.hour', 'eq', 23), ctx({ nowMs: sunday - 1 }))).to.equal(true)
    expect(holds(leaf('time.weekday', 'eq', 6), ctx({ nowMs: sunday - 1 }))).to.equal(true)
  })

  it('keeps time facts in range before 1970', () => {
    const nowMs = Date.UTC(1969, 11, 31, 23, 59) // Wednesday
    expect(holds(leaf('time.hour', 'eq', 23), ctx({ nowMs }))).to.equal(true)
    expect(holds(leaf('time.weekday', 'eq', 3), ctx({ nowMs }))).to.equal(true)
  })

  it('agrees with Date on hour and weekday across many instants', () => {
    for (let nowMs = -5e11; nowMs < 5e12; nowMs += 7_777_777_777) {
      const d = new Date(nowMs)
      expect(compileCondition(leaf('time.hour', 'eq', d.getUTCHours()))(ctx({ nowMs }))).to.equal(true)
      expect(compileCondition(leaf('time.weekday', 'eq', d.getUTCDay()))(ctx({ nowMs }))).to.equal(true)
    }
  })
})

describe('conditions: ops', () => {
  it('compares scalars with === for eq', () => {
    expect(holds(leaf('event.sku', 'eq', 'A1'))).to.equal(true)
    expect(holds(leaf('event.sku', 'eq', 'a1'))).to.equal(false)
    expect(holds(leaf('event.price', 'eq', '49.9'))).to.equal(false)
    expect(holds(leaf('event.gift', 'eq', false))).to.equal(true)
  })

  it('is false for eq on an array fact even when it holds the value', () => {
    expect(holds(leaf('event.tags', 'eq', 'new'))).to.equal(false)
  })

  it('is true for ne when a present scalar differs, whatever its type', () => {
    expect(holds(leaf('event.sku', 'ne', 'B2'))).to.equal(true)
    expect(holds(leaf('event.sku', 'ne', 'A1'))).to.equal(false)
    expect(holds(leaf('event.price', 'ne', 'cheap'))).to.equal(true)
  })

  it('treats a missing fact as false for ne', () => {
    expect(holds(leaf('event.nope', 'ne', 'x'))).to.equal(false)
    expect(holds(leaf('event.nothing', 'ne', 'x'))).to.equal(false)
  })

  it('treats an array fact as false for ne', () => {
    expect(holds(leaf('event.tags', 'ne', 'x'))).to.equal(false)
  })

  it('tests membership of a scalar for in', () => {
    expect(holds(leaf('event.sku', 'in', ['Z9', 'A1']))).to.equal(true)
    expect(holds(leaf('event.sku', 'in', ['Z9']))).to.equal(false)
    expect(holds(leaf('event.price', 'in', ['49.9']))).to.equal(false)
    expect(holds(leaf('event.nope', 'in', ['A1']))).to.equal(false)
    expect(holds(leaf('event.tags', 'in', ['new']))).to.equal(false)
  })

  it('is true for nin only on a present scalar outside the list', () => {
    expect(holds(leaf('event.sku', 'nin', ['Z9']))).to.equal(true)
    expect(holds(leaf('event.sku', 'nin', ['A1', 'Z9']))).to.equal(false)
  })

  it('treats a missing or array fact as false for nin', () => {
    expect(holds(leaf('event.nope', 'nin', ['A1']))).to.equal(false)
    expect(holds(leaf('event.nothing', 'nin', ['A1']))).to.equal(false)
    expect(holds(leaf('event.tags', 'nin', ['A1']))).to.equal(false)
  })

  it('compares numbers for gt, gte, lt and lte', () => {
    expect(holds(leaf('event.price', 'gt', 49.9))).to.equal(false)
    expect(holds(leaf('event.price', 'gte', 49.9))).to.equal(true)
    expect(holds(leaf('event.price', 'lt', 49.9))).to.equal(false)
    expect(holds(leaf('event.price', 'lte', 49.9))).to.equal(true)
    expect(holds(leaf('event.price', 'lt', 50))).to.equal(true)
    expect(holds(leaf('event.price', 'gt', -1))).to.equal(true)
  })

  it('never coerces a numeric string for gt', () => {
    const c = ctx({ event: { price: '100' } })
    expect(holds(leaf('event.price', 'gt', 1), c)).to.equal(false)
    expect(holds(leaf('event.price', 'lt', 1000), c)).to.equal(false)
  })

  it('treats a missing fact as false for gt, gte, lt and lte', () => {
    for (const op of ['gt', 'gte', 'lt', 'lte']) expect(holds(leaf('event.nope', op, 0))).to.equal(false)
  })

  it('treats a boolean or null fact as false for comparisons', () => {
    for (const op of ['gt', 'gte', 'lt', 'lte']) {
      expect(holds(leaf('event.gift', op, 0))).to.equal(false)
      expect(holds(leaf('event.nothing', op, 0))).to.equal(false)
    }
  })

  it('tests that an array fact holds the value for contains', () => {
    expect(holds(leaf('event.tags', 'contains', 'sale'))).to.equal(true)
    expect(holds(leaf('event.tags', 'contains', 'old'))).to.equal(false)
  })

  it('treats a string fact as false for contains (no substring search)', () => {
    expect(holds(leaf('event.path', 'contains', 'shoes'))).to.equal(false)
    expect(holds(leaf('event.nope', 'contains', 'shoes'))).to.equal(false)
  })

  it('matches string prefixes and suffixes', () => {
    expect(holds(leaf('event.path', 'startsWith', '/shoes/'))).to.equal(true)
    expect(holds(leaf('event.path', 'startsWith', '/hats/'))).to.equal(false)
    expect(holds(leaf('event.path', 'endsWith', '/red'))).to.equal(true)
    expect(holds(leaf('event.path', 'endsWith', 'blue'))).to.equal(false)
    expect(holds(leaf('event.path', 'startsWith', ''))).to.equal(true)
  })

  it('treats a number fact as false for startsWith, endsWith and glob', () => {
    expect(holds(leaf('event.price', 'startsWith', '4'))).to.equal(false)
    expect(holds(leaf('event.price', 'endsWith', '9'))).to.equal(false)
    expect(holds(leaf('event.price', 'glob', '*'))).to.equal(false)
  })

  it('matches a whole string with glob', () => {
    expect(holds(leaf('event.path', 'glob', '/shoes/*'))).to.equal(true)
    expect(holds(leaf('event.path', 'glob', '/shoes'))).to.equal(false)
    expect(holds(leaf('event.path', 'glob', '/sh?es/r?d'))).to.equal(true)
    expect(holds(leaf('event.path', 'glob', '*red'))).to.equal(true)
  })

  it('tells presence with exists, counting null as missing', () => {
    expect(holds(leaf('event.sku', 'exists', true))).to.equal(true)
    expect(holds(leaf('event.sku', 'exists', false))).to.equal(false)
    expect(holds(leaf('event.nope', 'exists', true))).to.equal(false)
    expect(holds(leaf('event.nope', 'exists', false))).to.equal(true)
    expect(holds(leaf('event.nothing', 'exists', false))).to.equal(true)
    expect(holds(leaf('event.gift', 'exists', true))).to.equal(true)
  })

  it('reports visitor counters and time as always present', () => {
    expect(holds(leaf('visitor.purchases', 'exists', true))).to.equal(true)
    expect(holds(leaf('time.hour', 'exists', true))).to.equal(true)
  })

  it('treats a missing attribute as false for every op but exists false', () => {
    const c = ctx({ attributes: {} })
    const cases: Array<[string, unknown]> = [['eq', 'x'], ['ne', 'x'], ['in', ['x']], ['nin', ['x']], ['gt', 1], ['gte', 1], ['lt', 1], ['lte', 1], ['contains', 'x'], ['startsWith', 'x'], ['endsWith', 'x'], ['glob', '*']]
    for (const [op, value] of cases) expect(holds(leaf('attribute.plan', op, value), c), op).to.equal(false)
    expect(holds(leaf('attribute.plan', 'exists', false), c)).to.equal(true)
  })

  it('never throws on an event body of unexpected shape', () => {
    const c = ctx({ event: { sku: { nested: true }, price: [1, 2], path: 7 } })
    expect(holds(leaf('event.sku', 'eq', 'A1'), c)).to.equal(false)
    expect(holds(leaf('event.sku', 'ne', 'A1'), c)).to.equal(false)
    expect(holds(leaf('event.price', 'gt', 0), c)).to.equal(false)
    expect(holds(leaf('event.path', 'glob', '*'), c)).to.equal(false)
    expect(holds(leaf('event.sku', 'exists', true), c)).to.equal(true)
  })
})

describe('conditions: combinators', () => {
  const yes = leaf('event.sku', 'eq', 'A1')
  const no = leaf('event.sku', 'eq', 'nope')

  it('needs every child for all, at every arity', () => {
    for (let n = 1; n <= 5; n++) {
      expect(holds({ all: Array<Condition>(n).fill(yes) })).to.equal(true)
      expect(holds({ all: [...Array<Condition>(n - 1).fill(yes), no] })).to.equal(false)
    }
  })

  it('needs one child for any, at every arity', () => {
    for (let n = 1; n <= 5; n++) {
      expect(holds({ any: Array<Condition>(n).fill(no) })).to.equal(false)
      expect(holds({ any: [...Array<Condition>(n - 1).fill(no), yes] })).to.equal(true)
    }
  })

  it('negates with not, so not-eq includes missing facts where ne does not', () => {
    expect(holds({ not: yes })).to.equal(false)
    expect(holds({ not: leaf('event.nope', 'eq', 'x') })).to.equal(true)
    expect(holds(leaf('event.nope', 'ne', 'x'))).to.equal(false)
  })

  it('nests all, any and not', () => {
    expect(holds({ all: [yes, { any: [no, { not: no }] }, { not: { all: [yes, no] } }] })).to.equal(true)
  })
})
