import { expect } from 'chai'
import { ApiError } from '../../src/errors.js'
import { assertCampaign, validateCampaign, validateCondition } from '../../src/matching/index.js'
import { parseIsoMs } from '../../src/matching/iso-time.js'

function valid (): Record<string, unknown> {
  return {
    name: 'Summer shoes',
    status: 'active',
    priority: 10,
    startsAt: '2025-06-01T00:00:00Z',
    endsAt: '2025-09-01T00:00:00Z',
    trigger: { events: ['productView'], platforms: ['web'], devices: ['mobile'], paths: ['/shoes/*'] },
    rule: { all: [{ fact: 'event.category', op: 'eq', value: 'shoes' }, { not: { fact: 'segment', op: 'contains', value: 'buyers' } }] },
    frequencyCap: { max: 3, per: 'hour' },
    content: { html: '<b>20% off</b>' },
  }
}

// The pointers of every error, after checking each carries the invalid_campaign code.
function fields (body: unknown): string[] {
  const errors = validateCampaign(body)
  for (const e of errors) {
    expect(e.code).to.equal('invalid_campaign')
    expect(e.message).to.be.a('string').and.not.equal('')
  }
  return errors.map(e => e.field as string)
}

function withKey (key: string, value: unknown): Record<string, unknown> {
  return { ...valid(), [key]: value }
}

function without (key: string): Record<string, unknown> {
  const body = valid()
  delete body[key]
  return body
}

const withRule = (rule: unknown): Record<string, unknown> => withKey('rule', rule)
const leaf = (fact: string, op: string, value: unknown): unknown => ({ fact, op, value })

describe('validation: campaign fields', () => {
  it('accepts a complete campaign', () => {
    expect(fields(valid())).to.deep.equal([])
  })

  it('accepts a minimal campaign with an empty trigger and no rule', () => {
    expect(fields({ name: 'n', status: 'paused', priority: -5, trigger: {}, content: null })).to.deep.equal([])
  })

  it('refuses a body that is not an object at the root pointer', () => {
    for (const body of [null, [], 'x', 3]) expect(fields(body)).to.deep.equal([''])
  })

  it('refuses unknown keys with their pointers, escaped per RFC 6901', () => {
    expect(fields(withKey('colour', 'red'))).to.deep.equal(['/colour'])
    expect(fields(withKey('a/b~c', 1))).to.deep.equal(['/a~1b~0c'])
    expect(fields(JSON.parse('{"__proto__": 1, "name": "n", "status": "active", "priority": 1, "trigger": {}, "content": 1}'))).to.deep.equal(['/__proto__'])
  })

  it('needs a name of 1 to 200 characters', () => {
    expect(fields(without('name'))).to.deep.equal(['/name'])
    expect(fields(withKey('name', ''))).to.deep.equal(['/name'])
    expect(fields(withKey('name', '   '))).to.deep.equal(['/name'])
    expect(fields(withKey('name', 7))).to.deep.equal(['/name'])
    expect(fields(withKey('name', 'x'.repeat(200)))).to.deep.equal([])
    expect(fields(withKey('name', 'x'.repeat(201)))).to.deep.equal(['/name'])
  })

  it('needs status active or paused', () => {
    expect(fields(withKey('status', 'draft'))).to.deep.equal(['/status'])
    expect(fields(without('status'))).to.deep.equal(['/status'])
  })

  it('needs an integer priority', () => {
    expect(fields(withKey('priority', 1.5))).to.deep.equal(['/priority'])
    expect(fields(withKey('priority', '1'))).to.deep.equal(['/priority'])
    expect(fields(without('priority'))).to.deep.equal(['/priority'])
    expect(fields(withKey('priority', -3))).to.deep.equal([])
  })

  it('refuses dates that are not ISO-8601 with a zone', () => {
    for (const bad of ['June 1', '2025-06-01T00:00:00', '2025-6-1', '2025-06-01T00:00Zjunk', 20250601]) {
      expect(fields(withKey('startsAt', bad)), String(bad)).to.deep.equal(['/startsAt'])
    }
  })

  it('refuses dates that do not exist', () => {
    for (const bad of ['2025-02-29T00:00:00Z', '2025-04-31', '2025-13-01', '2025-06-01T24:00:00Z', '2025-06-01T10:60:00Z', '2025-06-01T10:00:00+25:00']) {
      expect(fields(withKey('endsAt', bad)), bad).to.deep.equal(['/endsAt'])
    }
  })

  it('accepts bare dates, offsets and fractional seconds', () => {
    expect(fields(withKey('startsAt', '2025-06-01'))).to.deep.equal([])
    expect(fields(withKey('startsAt', '2024-02-29T23:59:59.123456+05:30'))).to.deep.equal([])
    expect(parseIsoMs('2025-06-01')).to.equal(Date.UTC(2025, 5, 1))
    expect(parseIsoMs('2025-06-01T02:00:00.5+02:00')).to.equal(Date.UTC(2025, 5, 1, 0, 0, 0, 500))
    expect(parseIsoMs('2025-06-01T00:00-01:30')).to.equal(Date.UTC(2025, 5, 1, 1, 30))
    expect(parseIsoMs('0050-01-01')).to.equal(Date.parse('0050-01-01T00:00:00Z'))
  })

  it('needs endsAt later than startsAt', () => {
    expect(fields(withKey('endsAt', '2025-06-01T00:00:00Z'))).to.deep.equal(['/endsAt'])
    expect(fields(withKey('endsAt', '2025-05-01T00:00:00Z'))).to.deep.equal(['/endsAt'])
    expect(fields(withKey('endsAt', '2025-06-01T00:00:00.001Z'))).to.deep.equal([])
  })

  it('needs a trigger object', () => {
    expect(fields(without('trigger'))).to.deep.equal(['/trigger'])
    expect(fields(withKey('trigger', []))).to.deep.equal(['/trigger'])
    expect(fields(withKey('trigger', { event: ['x'] }))).to.deep.equal(['/trigger/event'])
  })

  it('refuses empty, oversized and non-string trigger lists', () => {
    for (const key of ['events', 'platforms', 'devices', 'paths']) {
      expect(fields(withKey('trigger', { [key]: [] })), key).to.deep.equal([`/trigger/${key}`])
      expect(fields(withKey('trigger', { [key]: 'web' })), key).to.deep.equal([`/trigger/${key}`])
      expect(fields(withKey('trigger', { [key]: Array<string>(101).fill('x') })), key).to.deep.equal([`/trigger/${key}`])
      expect(fields(withKey('trigger', { [key]: Array<string>(100).fill('x') })), key).to.deep.equal([])
      expect(fields(withKey('trigger', { [key]: ['x', 3, ''] })), key).to.deep.equal([`/trigger/${key}/1`, `/trigger/${key}/2`])
    }
  })

  it('refuses bad path globs in the trigger', () => {
    expect(fields(withKey('trigger', { paths: ['/ok/*', '/' + 'x'.repeat(256)] }))).to.deep.equal(['/trigger/paths/1'])
    expect(fields(withKey('trigger', { paths: ['/' + 'x'.repeat(255)] }))).to.deep.equal([])
  })

  it('needs a frequency cap of 1 to 1000 per hour, day, week or lifetime', () => {
    expect(fields(withKey('frequencyCap', { max: 0, per: 'day' }))).to.deep.equal(['/frequencyCap/max'])
    expect(fields(withKey('frequencyCap', { max: 1.5, per: 'day' }))).to.deep.equal(['/frequencyCap/max'])
    expect(fields(withKey('frequencyCap', { max: 1001, per: 'day' }))).to.deep.equal(['/frequencyCap/max'])
    expect(fields(withKey('frequencyCap', { max: 1, per: 'month' }))).to.deep.equal(['/frequencyCap/per'])
    expect(fields(withKey('frequencyCap', { max: 1, per: 'lifetime', every: 2 }))).to.deep.equal(['/frequencyCap/every'])
    expect(fields(withKey('frequencyCap', 3))).to.deep.equal(['/frequencyCap'])
    expect(fields(withKey('frequencyCap', { max: 1000, per: 'week' }))).to.deep.equal([])
  })

  it('needs content of at most 16 KiB as UTF-8 JSON', () => {
    expect(fields(without('content'))).to.deep.equal(['/content'])
    const fits = 'x'.repeat(16 * 1024 - 2) // the quotes make 16384 bytes
    expect(fields(withKey('content', fits))).to.deep.equal([])
    expect(fields(withKey('content', fits + 'x'))).to.deep.equal(['/content'])
    expect(fields(withKey('content', 'é'.repeat(8192)))).to.deep.equal(['/content'])
    expect(fields(withKey('content', 'é'.repeat(8191)))).to.deep.equal([])
  })

  it('collects every error rather than stopping at the first', () => {
    const body = { name: '', status: 'on', priority: 0.5, startsAt: 'soon', trigger: { paths: [''] }, rule: { all: [leaf('event.x', 'gt', 'big'), leaf('nope', 'eq', 1)] }, content: 1, extra: true }
    expect(fields(body)).to.have.members(['/extra', '/name', '/status', '/priority', '/startsAt', '/trigger/paths/0', '/rule/all/0/value', '/rule/all/1/fact'])
  })

  it('throws an ApiError with every item from assertCampaign', () => {
    expect(() => { assertCampaign(valid()) }).to.not.throw()
    try {
      assertCampaign(withKey('name', ''))
      expect.fail('should throw')
    } catch (err) {
      expect(err).to.be.instanceOf(ApiError)
      expect((err as ApiError).status).to.equal(400)
      expect((err as ApiError).items.map(i => i.field)).to.deep.equal(['/name'])
    }
  })
})

describe('validation: conditions', () => {
  it('points at an unknown fact', () => {
    expect(fields(withRule(leaf('customer.age', 'eq', 1)))).to.deep.equal(['/rule/fact'])
    expect(fields(withRule(leaf('visitor.age', 'eq', 1)))).to.deep.equal(['/rule/fact'])
    expect(fields(withRule(leaf('time.minute', 'eq', 1)))).to.deep.equal(['/rule/fact'])
    expect(fields(withRule(leaf('event.', 'eq', 1)))).to.deep.equal(['/rule/fact'])
    expect(fields(withRule(leaf('event.a b', 'eq', 1)))).to.deep.equal(['/rule/fact'])
    expect(fields(withRule(leaf('attribute.' + 'x'.repeat(129), 'eq', 1)))).to.deep.equal(['/rule/fact'])
    expect(fields(withRule(leaf('segments', 'contains', 'x')))).to.deep.equal(['/rule/fact'])
  })

  it('accepts attribute and field names with the API name characters . : - _', () => {
    expect(fields(withRule(leaf('attribute.loyalty.tier', 'gte', 2)))).to.deep.equal([])
    expect(fields(withRule(leaf('event.utm:source-1_x', 'eq', 'a')))).to.deep.equal([])
    expect(fields(withRule(leaf('attribute.' + 'x'.repeat(128), 'eq', 1)))).to.deep.equal([])
  })

  it('refuses field names that plain objects inherit', () => {
    for (const name of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) {
      expect(fields(withRule(leaf(`event.${name}`, 'exists', true))), name).to.deep.equal(['/rule/fact'])
      expect(fields(withRule(leaf(`attribute.${name}`, 'exists', true))), name).to.deep.equal(['/rule/fact'])
    }
  })

  it('points at an unknown op deep in the tree', () => {
    expect(fields(withRule({ all: [leaf('event.a', 'eq', 1), leaf('event.b', 'like', 'x')] }))).to.deep.equal(['/rule/all/1/op'])
  })

  it('needs fact, op and value in a leaf', () => {
    expect(fields(withRule({ op: 'eq', value: 1 }))).to.deep.equal(['/rule/fact'])
    expect(fields(withRule({ fact: 'event.a', value: 1 }))).to.deep.equal(['/rule/op'])
    expect(fields(withRule({ fact: 'event.a', op: 'eq' }))).to.deep.equal(['/rule/value'])
    expect(fields(withRule({ fact: 7, op: 'eq', value: 1 }))).to.deep.equal(['/rule/fact'])
  })

  it('refuses unknown keys in leaves and beside all, any and not', () => {
    expect(fields(withRule({ fact: 'event.a', op: 'eq', value: 1, path: '$.x' }))).to.deep.equal(['/rule/path'])
    expect(fields(withRule({ all: [leaf('event.a', 'eq', 1)], any: [] }))).to.deep.equal(['/rule/any'])
    expect(fields(withRule({ not: leaf('event.a', 'eq', 1), fact: 'event.a' }))).to.deep.equal(['/rule/fact'])
  })

  it('needs value types that fit the op', () => {
    const cases: Array<[string, unknown]> = [
      ['eq', [1]], ['eq', null], ['eq', { a: 1 }], ['ne', null],
      ['in', 'x'], ['in', []], ['nin', 3],
      ['gt', '3'], ['gte', null], ['lt', true], ['lte', [1]],
      ['contains', ['x']], ['startsWith', 1], ['endsWith', null],
      ['glob', 5], ['glob', ''], ['glob', 'x'.repeat(257)],
      ['exists', 'yes'], ['exists', 1],
    ]
    for (const [op, value] of cases) expect(fields(withRule(leaf('event.a', op, value))), `${op} ${JSON.stringify(value)}`).to.deep.equal(['/rule/value'])
  })

  it('points at each bad element of an in list', () => {
    expect(fields(withRule(leaf('event.a', 'in', ['x', [1], 2, null])))).to.deep.equal(['/rule/value/1', '/rule/value/3'])
    expect(fields(withRule(leaf('event.a', 'nin', Array<number>(1001).fill(1))))).to.deep.equal(['/rule/value'])
  })

  it('accepts every op with a fitting value on an event field', () => {
    const cases: Array<[string, unknown]> = [
      ['eq', 'x'], ['eq', 1], ['eq', false], ['ne', 'x'], ['in', ['x', 1, true]], ['nin', [2]],
      ['gt', 1], ['gte', -1.5], ['lt', 0], ['lte', 1e9], ['contains', 'x'], ['contains', 3],
      ['startsWith', ''], ['endsWith', 'x'], ['glob', '/a/*'], ['exists', true], ['exists', false],
    ]
    for (const [op, value] of cases) expect(fields(withRule(leaf('event.a', op, value))), op).to.deep.equal([])
  })

  it('allows only contains on segment, so eq and in are refused', () => {
    expect(fields(withRule(leaf('segment', 'eq', 'vip')))).to.deep.equal(['/rule/op'])
    expect(fields(withRule(leaf('segment', 'in', ['vip'])))).to.deep.equal(['/rule/op'])
    expect(fields(withRule(leaf('segment', 'exists', true)))).to.deep.equal(['/rule/op'])
    expect(fields(withRule(leaf('segment', 'contains', 3)))).to.deep.equal(['/rule/value'])
    expect(fields(withRule(leaf('segment', 'contains', 'vip')))).to.deep.equal([])
  })

  it('checks ops and values against the type of visitor and time facts', () => {
    expect(fields(withRule(leaf('visitor.viewedSkus', 'gt', 1)))).to.deep.equal(['/rule/op'])
    expect(fields(withRule(leaf('visitor.viewedSkus', 'contains', 1)))).to.deep.equal(['/rule/value'])
    expect(fields(withRule(leaf('visitor.pageViews', 'startsWith', '1')))).to.deep.equal(['/rule/op'])
    expect(fields(withRule(leaf('visitor.pageViews', 'eq', '1')))).to.deep.equal(['/rule/value'])
    expect(fields(withRule(leaf('time.hour', 'in', [9, '10'])))).to.deep.equal(['/rule/value/1'])
    expect(fields(withRule(leaf('time.weekday', 'in', [0, 6])))).to.deep.equal([])
  })

  it('refuses empty and non-array all and any', () => {
    expect(fields(withRule({ all: [] }))).to.deep.equal(['/rule/all'])
    expect(fields(withRule({ any: [] }))).to.deep.equal(['/rule/any'])
    expect(fields(withRule({ any: leaf('event.a', 'eq', 1) }))).to.deep.equal(['/rule/any'])
  })

  it('refuses a condition that is not an object', () => {
    expect(fields(withRule('event.a == 1'))).to.deep.equal(['/rule'])
    expect(fields(withRule({ not: [leaf('event.a', 'eq', 1)] }))).to.deep.equal(['/rule/not'])
    expect(fields(withRule({}))).to.deep.equal(['/rule/fact', '/rule/op'])
  })

  it('allows 16 levels of nesting and refuses 17', () => {
    const nest = (levels: number): unknown => levels === 1 ? leaf('event.a', 'eq', 1) : { not: nest(levels - 1) }
    expect(fields(withRule(nest(16)))).to.deep.equal([])
    expect(fields(withRule(nest(17)))).to.deep.equal(['/rule' + '/not'.repeat(16)])
  })

  it('allows 64 leaves and refuses 65, at the root of the condition', () => {
    const leaves = (n: number): unknown => ({ any: Array.from({ length: n }, (_, i) => leaf('event.a', 'eq', i)) })
    expect(fields(withRule(leaves(64)))).to.deep.equal([])
    expect(fields(withRule(leaves(65)))).to.deep.equal(['/rule'])
  })

  it('validates a bare condition with pointers from its own root', () => {
    expect(validateCondition(leaf('event.a', 'eq', 1))).to.deep.equal([])
    expect(validateCondition({ any: [leaf('event.a', 'gt', 'x')] }).map(e => e.field)).to.deep.equal(['/any/0/value'])
    expect(validateCondition({ any: [leaf('event.a', 'gt', 'x')] }, '/segments/3/rule').map(e => e.field)).to.deep.equal(['/segments/3/rule/any/0/value'])
  })
})
