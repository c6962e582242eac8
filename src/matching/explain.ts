// Why a campaign would or would not be returned for an event: the same checks, in the same terms, as
// the compiled set and the visitor's cap check, but one campaign at a time and with a verdict per
// check. Not the hot path (the panel's "test an event"); it reuses the pieces the compiled set is made
// of (compileCondition, compileGlob, parseIsoMs, isCapped), so the semantics have one source.

import { compileCondition } from './compile-condition.js'
import { compileGlob } from './glob.js'
import { parseIsoMs } from './iso-time.js'
import { isCapped } from './caps.js'
import type { CampaignDef, Condition, ImpressionHistory, MatchContext } from './types.js'

export type CheckName = 'status' | 'schedule' | 'trigger' | 'platform' | 'condition' | 'cap'

export interface Check {
  check: CheckName
  ok: boolean
  detail: string
}

export interface Explanation {
  matched: boolean
  checks: Check[]
}

export function explainCampaign (def: CampaignDef, ctx: MatchContext, history: ImpressionHistory | null): Explanation {
  const checks: Check[] = [status(def), schedule(def, ctx.nowMs), trigger(def, ctx.event), platform(def, ctx.event), condition(def.rule, ctx), cap(def, history, ctx.nowMs)]
  return { matched: checks.every(c => c.ok), checks }
}

function status (def: CampaignDef): Check {
  return def.status === 'active'
    ? { check: 'status', ok: true, detail: 'The campaign is active.' }
    : { check: 'status', ok: false, detail: 'The campaign is paused.' }
}

function schedule (def: CampaignDef, nowMs: number): Check {
  const startMs = def.startsAt === undefined ? -Infinity : parseIsoMs(def.startsAt) ?? Infinity
  const endMs = def.endsAt === undefined ? Infinity : parseIsoMs(def.endsAt) ?? -Infinity
  if (nowMs < startMs) return { check: 'schedule', ok: false, detail: `It starts at ${def.startsAt}.` }
  if (nowMs >= endMs) return { check: 'schedule', ok: false, detail: `It ended at ${def.endsAt}.` }
  return { check: 'schedule', ok: true, detail: def.startsAt === undefined && def.endsAt === undefined ? 'No schedule: always on.' : 'Within its schedule.' }
}

function trigger (def: CampaignDef, event: Record<string, unknown>): Check {
  const { events, paths } = def.trigger
  if (events !== undefined && !events.includes(event.event as string)) {
    return { check: 'trigger', ok: false, detail: `The event "${String(event.event)}" is not one of ${events.join(', ')}.` }
  }
  if (paths !== undefined) {
    const path = event.path
    if (typeof path !== 'string') return { check: 'trigger', ok: false, detail: `The event has no path; the campaign needs one matching ${paths.join(', ')}.` }
    if (!paths.some(pattern => compileGlob(pattern)(path))) return { check: 'trigger', ok: false, detail: `The path "${path}" matches none of ${paths.join(', ')}.` }
  }
  return { check: 'trigger', ok: true, detail: events === undefined && paths === undefined ? 'Any event.' : 'The event kind and path are in the trigger.' }
}

function platform (def: CampaignDef, event: Record<string, unknown>): Check {
  const { platforms, devices } = def.trigger
  if (platforms !== undefined && !platforms.includes(event.platform as string)) {
    return { check: 'platform', ok: false, detail: `The platform "${String(event.platform)}" is not one of ${platforms.join(', ')}.` }
  }
  if (devices !== undefined && !devices.includes(event.device as string)) {
    return { check: 'platform', ok: false, detail: event.device === undefined ? `The event has no device; the campaign needs one of ${devices.join(', ')}.` : `The device "${String(event.device)}" is not one of ${devices.join(', ')}.` }
  }
  return { check: 'platform', ok: true, detail: platforms === undefined && devices === undefined ? 'Any platform and device.' : 'The platform and device are in the trigger.' }
}

function condition (rule: Condition | undefined, ctx: MatchContext): Check {
  if (rule === undefined) return { check: 'condition', ok: true, detail: 'No rule.' }
  if (compileCondition(rule)(ctx)) return { check: 'condition', ok: true, detail: 'The rule holds.' }
  // Which parts failed: the top-level children of an `all`, else the rule as a whole.
  const parts = 'all' in rule ? rule.all : [rule]
  const failed = parts.filter(part => !compileCondition(part)(ctx)).map(describe)
  return { check: 'condition', ok: false, detail: `Not met: ${failed.join('; ')}.` }
}

function cap (def: CampaignDef, history: ImpressionHistory | null, nowMs: number): Check {
  const limit = def.frequencyCap
  if (limit === undefined) return { check: 'cap', ok: true, detail: 'No frequency cap.' }
  if (isCapped(limit, history, nowMs)) return { check: 'cap', ok: false, detail: `The visitor saw it ${limit.max} time(s) per ${limit.per} already.` }
  return { check: 'cap', ok: true, detail: `Under its cap of ${limit.max} per ${limit.per}.` }
}

function describe (cond: Condition): string {
  if ('all' in cond) return `all of ${cond.all.length} conditions`
  if ('any' in cond) return `any of ${cond.any.map(describe).join(', ')}`
  if ('not' in cond) return `not (${describe(cond.not)})`
  return `${cond.fact} ${cond.op} ${JSON.stringify(cond.value)}`
}
