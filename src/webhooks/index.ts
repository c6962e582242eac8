// Public surface of the webhook definitions: configuration, compilation, rendering, sending. Delivery
// (the outbox relay, queues, workers) is src/delivery; the record codec is storage's (src/store/record-codec.ts).

export {
  AudienceTrigger, BasicAuth, BearerAuth, EventTrigger, HTTP_METHODS, ScheduleTrigger, WebhookConfigSchema, WebhookDelivery,
  assertWebhook, jsonRenderProblem, validateWebhook
} from './config.js'
export type { HttpMethod, ValidateOptions, WebhookAuth, WebhookConfig, WebhookTrigger } from './config.js'
export { compileWebhook, USER_AGENT } from './compile.js'
export type { CompiledTrigger, CompiledWebhook, HeaderTemplate } from './compile.js'
export { REDACTED, isSecretHeader, mapSecrets, redactWebhook, restoreSecrets } from './redact.js'
export { maskCredentials } from './mask-credentials.js'
export { compileTemplate, DEFAULT_AUDIENCE_PAYLOAD, DEFAULT_PAYLOAD, PLACEHOLDERS, Template, TemplateError, TEMPLATE_MODES } from './template.js'
export type { TemplateMode } from './template.js'
export { renderRequest } from './render.js'
export type { RenderedRequest } from './render.js'
export { batchIdOf, BATCH_ID_PREFIX } from './batch-id.js'
export { Sender } from './sender.js'
export type { SenderOptions } from './sender.js'
export { checkHostResolves, guardedLookup, literalRefusal, refusalReason, TargetRefusedError, TARGET_REFUSED_CODE } from './ssrf.js'
export { parseRetryAfterMs } from './retry-after.js'
export { nextRunMs, parseCron, parseEvery } from './schedule.js'
export type { Schedule } from './schedule.js'
export { CONFIG_LIMITS, DELIVERY_LIMITS } from './limits.js'
export { attemptRecord, OUTCOMES, SEND_ERRORS } from './types.js'
export type { AttemptRecord, DeliveryContext, DeliveryItem, Outcome, SendErrorCode, SendResult } from './types.js'
export { WebhookError, WEBHOOK_ERRORS } from './webhook-error.js'
export type { WebhookErrorCode } from './webhook-error.js'
