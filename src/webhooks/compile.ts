// compileWebhook: a validated configuration turned, once when it is saved, into everything the
// delivery path needs ready-made: compiled templates, the Authorization header, the signer, the
// constant headers, the schedule, the SSRF verdict on IP-literal hosts. Nothing here runs per delivery.

import { Webhook } from 'standardwebhooks'
import { assertWebhook, originEndOf, type HttpMethod, type ValidateOptions, type WebhookConfig } from './config.js'
import { CONFIG_LIMITS } from './limits.js'
import { parseCron, parseEvery, type Schedule } from './schedule.js'
import { literalRefusal, type TargetRefusedError } from './ssrf.js'
import { compileTemplate, DEFAULT_AUDIENCE_PAYLOAD, DEFAULT_PAYLOAD, type Template } from './template.js'
import type { NativeDelivery } from './types.js'

export const USER_AGENT = 'Beacon-Webhooks/1'

export type CompiledTrigger =
  | { kind: 'event', events: ReadonlySet<string> }
  | { kind: 'audience', segments: ReadonlySet<string>, onEnter: boolean, onExit: boolean }
  | { kind: 'schedule', schedule: Schedule, segments: readonly string[] }

export interface HeaderTemplate {
  name: string
  value: Template
}

export interface CompiledWebhook {
  readonly id: string
  readonly account: string
  readonly name: string
  readonly enabled: boolean
  readonly trigger: CompiledTrigger
  readonly method: HttpMethod
  /** POST and PUT carry the payload as the body; GET and DELETE carry it in the query. */
  readonly hasBody: boolean
  readonly url: Template
  /** The url's origin (scheme, host, port), where requests go: placeholders are not allowed in it. */
  readonly origin: string
  /** The url as written up to its path: every rendered url starts with it, the request target follows. */
  readonly urlPrefix: string
  /** Host of the url as URL.hostname spells it (IPv6 literals keep their brackets). */
  readonly targetHostname: string
  /** When the target host is an IP literal or localhost name that the SSRF guard refuses. */
  readonly targetRefusal: TargetRefusedError | null
  /**
   * Headers with no placeholders, lower-case names (content-type, user-agent, authorization, custom),
   * as a flat list (name, value, name, value, …): what a request starts from.
   */
  readonly staticHeaderList: readonly string[]
  readonly headerTemplates: readonly HeaderTemplate[]
  readonly signer: Webhook | null
  readonly payload: Template
  readonly mode: 'sync' | 'async'
  readonly timeoutMs: number
  readonly proxy: string | null
  readonly proxyRefusal: TargetRefusedError | null
  readonly delayMs: number
  /** Items per request: the configured batchSize, or 1 for GET/DELETE (one request per item). */
  readonly batchSize: number
  /** True when the body is a JSON array (configured batchSize > 1), even for a batch of one. */
  readonly bodyIsArray: boolean
  readonly maxAttempts: number
  readonly ratePerSecond: number | null
  /** The configuration as saved (with secrets); use redactWebhook before returning it. */
  readonly config: WebhookConfig
  /** A native destination delivered by this machinery (its own selection and sending); absent on webhooks. */
  readonly native?: NativeDelivery
}

/** Validate and compile; throws a 400 ApiError listing every problem. */
export function compileWebhook (id: string, account: string, body: unknown, options: ValidateOptions = {}): CompiledWebhook {
  const config = assertWebhook(body, options)
  const { request, delivery } = config
  const hasBody = request.method === 'POST' || request.method === 'PUT'
  const target = new URL(request.url.replace(/\{\{[^}]*\}\}/g, ''))
  const proxy = delivery.proxy === undefined ? null : new URL(delivery.proxy)
  const constantHeaders: Record<string, string> = { 'user-agent': USER_AGENT }
  if (hasBody) constantHeaders['content-type'] = 'application/json'
  if (request.auth !== undefined) constantHeaders.authorization = authorizationOf(request.auth)
  const headerTemplates: HeaderTemplate[] = []
  for (const [name, value] of Object.entries(request.headers ?? {})) {
    const template = compileTemplate(value, 'header')
    if (template.isConstant) constantHeaders[name.toLowerCase()] = value
    else headerTemplates.push({ name: name.toLowerCase(), value: template })
  }
  return {
    id,
    account,
    name: config.name,
    enabled: config.enabled,
    trigger: compileTrigger(config.trigger),
    method: request.method,
    hasBody,
    url: compileTemplate(request.url, 'url'),
    origin: target.origin,
    urlPrefix: request.url.slice(0, originEndOf(request.url)),
    targetHostname: target.hostname,
    targetRefusal: literalRefusal(target.hostname),
    staticHeaderList: Object.entries(constantHeaders).flat(),
    headerTemplates,
    signer: request.signingSecret === undefined ? null : new Webhook(request.signingSecret),
    payload: compileTemplate(request.payload ?? (config.trigger.kind === 'audience' ? DEFAULT_AUDIENCE_PAYLOAD : DEFAULT_PAYLOAD), 'json'),
    mode: delivery.mode,
    timeoutMs: delivery.timeoutMs,
    proxy: proxy === null ? null : proxy.origin,
    proxyRefusal: proxy === null ? null : literalRefusal(proxy.hostname),
    delayMs: delivery.delayMs ?? 0,
    batchSize: hasBody ? delivery.batchSize : 1,
    bodyIsArray: hasBody && delivery.batchSize > 1,
    maxAttempts: delivery.maxAttempts ?? CONFIG_LIMITS.attemptsDefault,
    ratePerSecond: delivery.ratePerSecond ?? null,
    config,
  }
}

function authorizationOf (auth: NonNullable<WebhookConfig['request']['auth']>): string {
  if (auth.type === 'bearer') return `Bearer ${auth.token}`
  return 'Basic ' + Buffer.from(`${auth.username}:${auth.password}`, 'utf8').toString('base64')
}

function compileTrigger (trigger: WebhookConfig['trigger']): CompiledTrigger {
  switch (trigger.kind) {
    case 'event':
      return { kind: 'event', events: new Set(trigger.events) }
    case 'audience':
      return { kind: 'audience', segments: new Set(trigger.segments), onEnter: trigger.on.includes('enter'), onExit: trigger.on.includes('exit') }
    case 'schedule':
      return { kind: 'schedule', schedule: scheduleOf(trigger), segments: trigger.segments ?? [] }
  }
}

function scheduleOf (trigger: { cron?: string, every?: string }): Schedule {
  // validateWebhook has checked both, so the parse results are known to be good here.
  if (trigger.every !== undefined) return { kind: 'every', everyMs: parseEvery(trigger.every) as number, source: trigger.every }
  const cron = trigger.cron as string
  return { kind: 'cron', cron: parseCron(cron) as Exclude<ReturnType<typeof parseCron>, string>, source: cron }
}
