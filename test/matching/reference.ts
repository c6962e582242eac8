// The obvious implementation, kept deliberately naive: for every event, walk every campaign's
// JSON. It exists to pin down semantics (property tests compare the compiled matcher with it)
// and as the benchmark baseline (bench/match.ts). A test oracle: it is not part of the server.

import type { CampaignInput, Condition, MatchContext, MatchedCampaign, Scalar } from '../../src/matching/types.js'
import { parseIsoMs } from '../../src/matching/iso-time.js'

export function referenceMatch (campaigns: readonly CampaignInput[], ctx: MatchContext): MatchedCampaign[] {
  const out: MatchedCampaign[] = []
  for (const { id, def } of campaigns) {
    if (def.status !== 'active') continue
    if (def.startsAt !== undefined && !(ctx.nowMs >= (parseIsoMs(def.startsAt) ?? Infinity))) continue
    if (def.endsAt !== undefined && !(ctx.nowMs < (parseIsoMs(def.endsAt) ?? -Infinity))) continue
    if (!triggerAccepts(def.trigger.events, ctx.event.event)) continue
    if (!triggerAccepts(def.trigger.platforms, ctx.event.platform)) continue
    if (!triggerAccepts(def.trigger.devices, ctx.event.device)) continue
    const paths = def.trigger.paths
    if (paths !== undefined) {
      const path = ctx.event.path
      if (typeof path !== 'string' || !paths.some(p => simpleGlob(p, path))) continue
    }
    if (def.rule !== undefined && !evaluate(def.rule, ctx)) continue
    out.push({ id, name: def.name, priority: def.priority, content: def.content, cap: def.frequencyCap ?? null, experiment: null })
  }
  return out.sort((a, b) => b.priority - a.priority || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
}

function triggerAccepts (list: readonly string[] | undefined, value: unknown): boolean {
  return list === undefined || list.some(v => v === value)
}

export function evaluate (cond: Condition, ctx: MatchContext): boolean {
  if ('all' in cond) return cond.all.every(c => evaluate(c, ctx))
  if ('any' in cond) return cond.any.some(c => evaluate(c, ctx))
  if ('not' in cond) return !evaluate(cond.not, ctx)
  const { fact, op, value } = cond
  if (fact === 'segment') return op === 'contains' && ctx.segments.has(value as string)
  const v = resolve(fact, ctx)
  const missing = v === undefined || v === null
  const scalar = typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean'
  switch (op) {
    case 'eq': return !missing && v === value
    case 'ne': return scalar && v !== value
    case 'in': return scalar && (value as readonly Scalar[]).some(x => x === v)
    case 'nin': return scalar && !(value as readonly Scalar[]).some(x => x === v)
    case 'gt': return typeof v === 'number' && v > (value as number)
    case 'gte': return typeof v === 'number' && v >= (value as number)
    case 'lt': return typeof v === 'number' && v < (value as number)
    case 'lte': return typeof v === 'number' && v <= (value as number)
    case 'contains': return Array.isArray(v) && v.some(x => x === value)
    case 'startsWith': return typeof v === 'string' && v.slice(0, (value as string).length) === value
    case 'endsWith': return typeof v === 'string' && v.length >= (value as string).length && v.slice(v.length - (value as string).length) === value
    case 'glob': return typeof v === 'string' && simpleGlob(value as string, v)
    case 'exists': return !missing === value
  }
}

function resolve (fact: string, ctx: MatchContext): unknown {
  const [head, ...rest] = fact.split('.')
  const name = rest.join('.')
  if (head === 'event') return ctx.event[name]
  if (head === 'attribute') return ctx.attributes[name]
  if (head === 'time') {
    const date = new Date(ctx.nowMs)
    return name === 'hour' ? date.getUTCHours() : date.getUTCDay()
  }
  const visitor = ctx.visitor
  switch (name) {
    case 'firstSeenSecondsAgo': return Math.floor((ctx.nowMs - visitor.firstSeenMs) / 1000)
    case 'lastSeenSecondsAgo': return Math.floor((ctx.nowMs - visitor.lastSeenMs) / 1000)
    case 'pageViews': return visitor.pageViews
    case 'productViews': return visitor.productViews
    case 'purchases': return visitor.purchases
    case 'totalSpent': return visitor.totalSpent
    case 'viewedSkus': return visitor.viewedSkus
    case 'purchasedSkus': return visitor.purchasedSkus
    case 'viewedCategories': return visitor.viewedCategories
  }
  return undefined
}

/** Textbook dynamic programming over code points: can pattern[0..i) match s[0..j)? */
export function simpleGlob (pattern: string, s: string): boolean {
  const p = Array.from(pattern)
  const t = Array.from(s)
  let row: boolean[] = Array.from({ length: t.length + 1 }, (_, j) => j === 0)
  for (const pc of p) {
    const next: boolean[] = new Array<boolean>(t.length + 1).fill(false)
    next[0] = pc === '*' && row[0] === true
    for (let j = 1; j <= t.length; j++) {
      if (pc === '*') next[j] = row[j] === true || next[j - 1] === true
      else next[j] = row[j - 1] === true && (pc === '?' || pc === t[j - 1])
    }
    row = next
  }
  return row[t.length] === true
}
