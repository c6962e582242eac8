// Checks a whole campaign definition as the admin API receives it (parsed JSON of unknown
// shape) and reports every problem at once, each with the JSON pointer of the offending node.

import { ApiError, errorItem, type ErrorItem } from '../errors.js'
import { globProblem } from './glob.js'
import { JSON_DEPTH_MAX, nestsDeeper } from './json-depth.js'
import { parseIsoMs } from './iso-time.js'
import { pointer } from './json-pointer.js'
import { ALLOCATIONS, CAP_PERIODS, GOAL_METRICS, type CampaignDef } from './types.js'
import { isPlainObject, validateCondition } from './validate-condition.js'

export const NAME_LENGTH_MAX = 200
export const TRIGGER_VALUES_MAX = 100
export const TRIGGER_VALUE_LENGTH_MAX = 200
export const CONTENT_SIZE_MAX_BYTES = 16 * 1024
// Every capped impression keeps a timestamp per visitor, so a cap is also a storage bound.
export const CAP_MAX = 1000
export const VARIANTS_MAX = 20
export const GOALS_MAX = 5
export const GOAL_WINDOW_DAYS_MAX = 90
export const VARIANT_ID_LENGTH_MAX = 64
export const SALT_LENGTH_MAX = 64
const VARIANT_ID = /^[A-Za-z0-9_.-]+$/

const CAMPAIGN_KEYS = ['name', 'status', 'priority', 'startsAt', 'endsAt', 'trigger', 'rule', 'frequencyCap', 'content',
  'variants', 'trafficPercent', 'allocation', 'goals', 'revision', 'revisionSince', 'salt']
const VARIANT_KEYS = ['id', 'weight', 'content', 'control']
const GOAL_KEYS = ['event', 'metric', 'windowDays']
const TRIGGER_KEYS = ['events', 'platforms', 'devices', 'paths']
const CAP_KEYS = ['max', 'per']

type Fail = (field: string, message: string) => void

/** Every problem found; an empty list means `body` is a valid CampaignDef. */
export function validateCampaign (body: unknown): ErrorItem[] {
  const errors: ErrorItem[] = []
  const fail: Fail = (field, message) => { errors.push(errorItem('invalid_campaign', field, message)) }
  if (!isPlainObject(body)) {
    fail('', 'a campaign must be a JSON object')
    return errors
  }
  unknownKeys(body, '', CAMPAIGN_KEYS, fail)

  const { name, status, priority, trigger, frequencyCap } = body
  if (typeof name !== 'string') fail('/name', 'name is required and must be a string')
  else if (name.trim() === '') fail('/name', 'name must not be empty')
  else if (name.length > NAME_LENGTH_MAX) fail('/name', `name is longer than ${NAME_LENGTH_MAX} characters`)

  if (status !== 'active' && status !== 'paused') fail('/status', 'status must be "active" or "paused"')
  if (!Number.isSafeInteger(priority)) fail('/priority', 'priority must be an integer')

  const startMs = instant(body, 'startsAt', fail)
  const endMs = instant(body, 'endsAt', fail)
  if (startMs !== null && endMs !== null && endMs <= startMs) fail('/endsAt', 'endsAt must be later than startsAt')

  if (!isPlainObject(trigger)) fail('/trigger', 'trigger is required and must be an object (use {} for every event)')
  else {
    unknownKeys(trigger, '/trigger', TRIGGER_KEYS, fail)
    for (const key of TRIGGER_KEYS) {
      if (Object.hasOwn(trigger, key)) triggerList(trigger[key], pointer('/trigger', key), key === 'paths', fail)
    }
  }

  if (Object.hasOwn(body, 'rule')) {
    for (const error of validateCondition(body.rule, '/rule')) errors.push(error)
  }

  if (Object.hasOwn(body, 'frequencyCap')) {
    if (!isPlainObject(frequencyCap)) fail('/frequencyCap', 'frequencyCap must be an object {max, per}')
    else {
      unknownKeys(frequencyCap, '/frequencyCap', CAP_KEYS, fail)
      const { max, per } = frequencyCap
      if (typeof max !== 'number' || !Number.isInteger(max) || max < 1 || max > CAP_MAX) fail('/frequencyCap/max', `max must be an integer from 1 to ${CAP_MAX}`)
      if (!(CAP_PERIODS as readonly unknown[]).includes(per)) fail('/frequencyCap/per', `per must be one of ${CAP_PERIODS.join(', ')}`)
    }
  }

  if (!Object.hasOwn(body, 'content') || body.content === undefined) fail('/content', 'content is required')
  else {
    // Before anything walks it: JSON.stringify and msgpackr recurse.
    if (nestsDeeper(body.content, JSON_DEPTH_MAX)) {
      fail('/content', `content nests objects and arrays deeper than ${JSON_DEPTH_MAX} levels`)
      return errors
    }
    const bytes = jsonBytes(body.content)
    if (bytes === null) fail('/content', 'content must be JSON')
    else if (bytes > CONTENT_SIZE_MAX_BYTES) fail('/content', `content is ${bytes} bytes as JSON; at most ${CONTENT_SIZE_MAX_BYTES} are allowed`)
  }
  experiment(body, fail)
  return errors
}

/** variants, trafficPercent, allocation, goals, salt (revision and revisionSince are the catalog's). */
function experiment (body: Record<string, unknown>, fail: Fail): void {
  const { variants, trafficPercent, allocation, goals, salt, revision, revisionSince } = body
  const has = (key: string): boolean => Object.hasOwn(body, key)
  if (has('variants')) {
    if (!Array.isArray(variants) || variants.length < 2 || variants.length > VARIANTS_MAX) fail('/variants', `variants must be an array of 2 to ${VARIANTS_MAX} variants`)
    else {
      const seen = new Set<string>()
      let controls = 0
      variants.forEach((v: unknown, i) => {
        const at = pointer('/variants', i)
        if (!isPlainObject(v)) return fail(at, 'a variant must be an object {id, weight, content?, control?}')
        unknownKeys(v, at, VARIANT_KEYS, fail)
        if (typeof v.id !== 'string' || !VARIANT_ID.test(v.id) || v.id.length > VARIANT_ID_LENGTH_MAX) fail(`${at}/id`, `id must be 1 to ${VARIANT_ID_LENGTH_MAX} letters, digits, "_", "-" or "."`)
        else if (seen.has(v.id)) fail(`${at}/id`, `the id "${v.id}" is used by another variant`)
        else seen.add(v.id)
        if (typeof v.weight !== 'number' || !Number.isFinite(v.weight) || v.weight <= 0) fail(`${at}/weight`, 'weight must be a positive number')
        if (Object.hasOwn(v, 'control') && typeof v.control !== 'boolean') fail(`${at}/control`, 'control must be true or false')
        if (v.control === true) controls++
        if (Object.hasOwn(v, 'content')) {
          const bytes = jsonBytes(v.content)
          if (bytes === null || v.content === undefined) fail(`${at}/content`, 'content must be JSON')
          else if (bytes > CONTENT_SIZE_MAX_BYTES) fail(`${at}/content`, `content is ${bytes} bytes as JSON; at most ${CONTENT_SIZE_MAX_BYTES} are allowed`)
        }
      })
      if (controls > 1) fail('/variants', 'at most one variant may be the control')
    }
  }
  const needsVariants = (key: string): void => { if (has(key) && !has('variants')) fail('/' + key, `${key} needs variants`) }
  for (const key of ['trafficPercent', 'allocation', 'goals', 'salt']) needsVariants(key)
  if (has('trafficPercent') && (typeof trafficPercent !== 'number' || !Number.isFinite(trafficPercent) || trafficPercent < 0 || trafficPercent > 100)) {
    fail('/trafficPercent', 'trafficPercent must be a number from 0 to 100')
  }
  if (has('allocation') && !(ALLOCATIONS as readonly unknown[]).includes(allocation)) fail('/allocation', `allocation must be one of ${ALLOCATIONS.join(', ')}`)
  if (has('goals')) {
    if (!Array.isArray(goals) || goals.length < 1 || goals.length > GOALS_MAX) fail('/goals', `goals must be an array of 1 to ${GOALS_MAX} goals`)
    else {
      goals.forEach((g: unknown, i) => {
        const at = pointer('/goals', i)
        if (!isPlainObject(g)) return fail(at, 'a goal must be an object {event, metric, windowDays}')
        unknownKeys(g, at, GOAL_KEYS, fail)
        if (typeof g.event !== 'string' || g.event === '' || g.event.length > TRIGGER_VALUE_LENGTH_MAX) fail(`${at}/event`, 'event must be an event type')
        if (!(GOAL_METRICS as readonly unknown[]).includes(g.metric)) fail(`${at}/metric`, `metric must be one of ${GOAL_METRICS.join(', ')}`)
        if (!Number.isInteger(g.windowDays) || (g.windowDays as number) < 1 || (g.windowDays as number) > GOAL_WINDOW_DAYS_MAX) fail(`${at}/windowDays`, `windowDays must be an integer from 1 to ${GOAL_WINDOW_DAYS_MAX}`)
      })
    }
  }
  if (allocation === 'bandit') {
    const primary = Array.isArray(goals) ? goals[0] as Record<string, unknown> | undefined : undefined
    if (primary?.metric !== 'conversion') fail('/allocation', 'a bandit needs goals whose first (primary) goal has metric "conversion"')
  }
  if (has('salt') && (typeof salt !== 'string' || salt.length > SALT_LENGTH_MAX)) fail('/salt', `salt must be a string of at most ${SALT_LENGTH_MAX} characters`)
  if (has('revision') && !(Number.isSafeInteger(revision) && (revision as number) >= 1)) fail('/revision', 'revision is kept by Beacon (a positive integer; leave it out)')
  if (has('revisionSince') && (typeof revisionSince !== 'string' || parseIsoMs(revisionSince) === null)) fail('/revisionSince', 'revisionSince is kept by Beacon (an ISO-8601 date-time; leave it out)')
}

/** For callers that prefer a throw: an ApiError carrying every item, as the HTTP layer expects. */
export function assertCampaign (body: unknown): asserts body is CampaignDef {
  const errors = validateCampaign(body)
  if (errors.length > 0) throw ApiError.of(errors, 'The campaign definition is invalid.')
}

function unknownKeys (obj: Record<string, unknown>, path: string, known: readonly string[], fail: Fail): void {
  for (const key of Object.keys(obj)) {
    if (!known.includes(key)) fail(pointer(path, key), `unknown key "${key}"`)
  }
}

function instant (body: Record<string, unknown>, key: 'startsAt' | 'endsAt', fail: Fail): number | null {
  if (!Object.hasOwn(body, key)) return null
  const text = body[key]
  const ms = typeof text === 'string' ? parseIsoMs(text) : null
  if (ms === null) fail('/' + key, `${key} must be an ISO-8601 date-time with a zone, e.g. "2025-06-01T00:00:00Z"`)
  return ms
}

function triggerList (list: unknown, path: string, globs: boolean, fail: Fail): void {
  if (!Array.isArray(list)) {
    fail(path, 'must be an array of strings (leave the key out to accept any value)')
    return
  }
  if (list.length === 0) fail(path, 'must not be empty (leave the key out to accept any value)')
  else if (list.length > TRIGGER_VALUES_MAX) fail(path, `at most ${TRIGGER_VALUES_MAX} entries are allowed`)
  list.forEach((item: unknown, i) => {
    const at = pointer(path, i)
    if (typeof item !== 'string') fail(at, 'must be a string')
    else if (globs) {
      const problem = globProblem(item)
      if (problem !== null) fail(at, problem)
    } else if (item === '') fail(at, 'must not be empty')
    else if (item.length > TRIGGER_VALUE_LENGTH_MAX) fail(at, `is longer than ${TRIGGER_VALUE_LENGTH_MAX} characters`)
  })
}

function jsonBytes (v: unknown): number | null {
  try {
    const text = JSON.stringify(v)
    return typeof text === 'string' ? Buffer.byteLength(text, 'utf8') : null
  } catch {
    return null
  }
}
