// A rule (campaign condition or segment rule) as a sentence a marketer reads: "viewed a product
// (productView) at least 3 times in the last 7 days and attribute plan is “pro”".

// The rule's shape (condition.tsx's, repeated: this file is also compiled for its unit test, without JSX).
type Condition = { all: Condition[] } | { any: Condition[] } | { not: Condition } | Leaf
interface Leaf { fact: string, op: string, value?: unknown, event?: string, within?: string, field?: string }

const OP_WORDS: Record<string, string> = {
  eq: 'is', ne: 'is not', in: 'is one of', nin: 'is none of', gt: 'is more than', gte: 'is at least', lt: 'is less than', lte: 'is at most',
  contains: 'contains', startsWith: 'starts with', endsWith: 'ends with', glob: 'matches',
}
/** For counts: "at least 3 times". */
const COUNT_WORDS: Record<string, string> = { eq: 'exactly', ne: 'other than', gt: 'more than', gte: 'at least', lt: 'fewer than', lte: 'at most' }

const FACT_WORDS: Record<string, string> = {
  'event.path': 'the page path', 'event.platform': 'the platform', 'event.device': 'the device', 'event.sku': 'the product SKU',
  'event.price': 'the product price', 'event.category': 'the product category', 'event.brand': 'the brand', 'event.orderTotal': 'the order total',
  'visitor.pageViews': 'pages viewed', 'visitor.productViews': 'products viewed', 'visitor.purchases': 'purchases', 'visitor.totalSpent': 'total spent',
  'visitor.firstSeenSecondsAgo': 'seconds since the first visit', 'visitor.lastSeenSecondsAgo': 'seconds since the last visit',
  'visitor.viewedSkus': 'the SKUs viewed', 'visitor.purchasedSkus': 'the SKUs bought', 'visitor.viewedCategories': 'the categories viewed',
  'time.hour': 'the hour (UTC)', 'time.weekday': 'the weekday',
}

const EVENT_WORDS: Record<string, string> = { pageView: 'viewed a page', productView: 'viewed a product', purchase: 'made a purchase', campaignView: 'saw a campaign', campaignClick: 'clicked a campaign' }

const UNITS: Record<string, string> = { m: 'minute', h: 'hour', d: 'day' }

function value (v: unknown): string {
  if (Array.isArray(v)) return v.map(value).join(', ')
  return typeof v === 'string' ? `“${v}”` : JSON.stringify(v) ?? 'nothing'
}

function period (within: string | undefined): string {
  const match = /^(\d+)([mhd])$/.exec(within ?? '')
  if (match === null) return 'ever'
  const n = Number(match[1])
  return `in the last ${n === 1 ? '' : `${n} `}${UNITS[match[2]!]!}${n === 1 ? '' : 's'}`
}

function leafText (leaf: Leaf): string {
  if (leaf.fact === 'count') {
    const did = EVENT_WORDS[leaf.event ?? ''] ?? `did ${leaf.event ?? 'an event'}`
    const n = Number(leaf.value)
    return `${did} ${COUNT_WORDS[leaf.op] ?? leaf.op} ${value(leaf.value)} time${n === 1 ? '' : 's'} ${period(leaf.within)}`
  }
  if (leaf.fact === 'sum') return `the total ${leaf.field ?? 'value'} of ${leaf.event ?? 'events'} ${period(leaf.within)} ${OP_WORDS[leaf.op] ?? leaf.op} ${value(leaf.value)}`
  if (leaf.fact === 'segment') return leaf.op === 'ne' || leaf.op === 'nin' ? `is not in the segment ${value(leaf.value)}` : `is in the segment ${value(leaf.value)}`
  const subject = FACT_WORDS[leaf.fact] ??
    (leaf.fact.startsWith('attribute.') ? `attribute ${leaf.fact.slice('attribute.'.length)}` : leaf.fact.startsWith('event.') ? `the event's ${leaf.fact.slice('event.'.length)}` : leaf.fact)
  if (leaf.op === 'exists') return `${subject} ${leaf.value === false ? 'is not set' : 'is set'}`
  return `${subject} ${OP_WORDS[leaf.op] ?? leaf.op} ${value(leaf.value)}`
}

/** The rule in words; a group inside another is put in parentheses. */
export function ruleText (rule: Condition | undefined, nested = false): string {
  if (rule === undefined) return 'no condition'
  const wrap = (text: string): string => nested ? `(${text})` : text
  if ('all' in rule) return rule.all.length === 0 ? 'always' : rule.all.length === 1 ? ruleText(rule.all[0], nested) : wrap(rule.all.map(c => ruleText(c, true)).join(' and '))
  if ('any' in rule) return rule.any.length === 0 ? 'never' : rule.any.length === 1 ? ruleText(rule.any[0], nested) : wrap(rule.any.map(c => ruleText(c, true)).join(' or '))
  if ('not' in rule) {
    const inner = rule.not
    if ('fact' in inner && inner.fact === 'segment' && (inner.op === 'eq' || inner.op === 'in')) return `is not in the segment ${value(inner.value)}`
    return `it is not so that ${ruleText(inner, true)}`
  }
  return leafText(rule)
}
