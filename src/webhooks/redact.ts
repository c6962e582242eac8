// Secrets never leave through GET: redactWebhook replaces each with "[redacted]" (rather than
// removing it, so a client can see that one is set). restoreSecrets lets a client PUT back what it
// got from GET: a "[redacted]" where a secret was stored keeps the stored secret.
//
// Secrets: request.auth.password, request.auth.token, request.signingSecret, and the value of every
// custom header whose name looks like a credential (see isSecretHeader).

export const REDACTED = '[redacted]'

/**
 * The parts of a webhook configuration that hold secrets. Structural, so that this file needs
 * nothing from config.ts (which imports REDACTED and isSecretHeader from here): any WebhookConfig is one.
 */
export interface WithSecrets {
  request: {
    auth?: { type: 'basic', username: string, password: string } | { type: 'bearer', token: string } | undefined
    signingSecret?: string | undefined
    headers?: Record<string, string> | undefined
  }
}

const SECRET_HEADER = /auth|token|secret|key|pass|cookie|session|signature|credential/i

/** Whether a custom header's value is treated as a secret (Authorization, X-Api-Key, Cookie, …). */
export function isSecretHeader (name: string): boolean {
  return SECRET_HEADER.test(name)
}

/** A copy of the configuration safe to return from GET. */
export function redactWebhook<C extends WithSecrets> (config: C): C {
  return mapSecrets(config, toRedacted)
}

/** A copy of the configuration with every secret replaced by `map(secret)` (redacted, sealed, opened). */
export function mapSecrets<C extends WithSecrets> (config: C, map: (secret: string) => string): C {
  const request: WithSecrets['request'] = { ...config.request }
  if (request.auth !== undefined) {
    request.auth = request.auth.type === 'basic'
      ? { ...request.auth, password: map(request.auth.password) }
      : { ...request.auth, token: map(request.auth.token) }
  }
  if (request.signingSecret !== undefined) request.signingSecret = map(request.signingSecret)
  if (request.headers !== undefined) {
    const headers: Record<string, string> = {}
    for (const [name, value] of Object.entries(request.headers)) headers[name] = isSecretHeader(name) ? map(value) : value
    request.headers = headers
  }
  return { ...config, request } as C
}

function toRedacted (): string { return REDACTED }

/**
 * For PUT: where the incoming body has "[redacted]" in a secret's place and the stored configuration
 * has that secret, put the stored secret back (and push the field's JSON pointer onto `kept`). Everything else is returned as is (validate afterwards:
 * a "[redacted]" left over, with nothing stored to restore, is refused by validateWebhook).
 */
export function restoreSecrets (incoming: unknown, previous: WithSecrets | null, kept: string[] = []): unknown {
  if (previous === null || !isObject(incoming) || !isObject(incoming.request)) return incoming
  const request: Record<string, unknown> = { ...incoming.request }
  const before = previous.request
  if (request.signingSecret === REDACTED && before.signingSecret !== undefined) {
    request.signingSecret = before.signingSecret
    kept.push('/request/signingSecret')
  }
  if (isObject(request.auth) && before.auth !== undefined && request.auth.type === before.auth.type) {
    const auth: Record<string, unknown> = { ...request.auth }
    if (before.auth.type === 'basic' && auth.password === REDACTED) {
      auth.password = before.auth.password
      kept.push('/request/auth/password')
    }
    if (before.auth.type === 'bearer' && auth.token === REDACTED) {
      auth.token = before.auth.token
      kept.push('/request/auth/token')
    }
    request.auth = auth
  }
  if (isObject(request.headers) && before.headers !== undefined) {
    const headers: Record<string, unknown> = { ...request.headers }
    for (const [name, value] of Object.entries(headers)) {
      if (value === REDACTED && isSecretHeader(name) && Object.hasOwn(before.headers, name)) {
        headers[name] = before.headers[name]
        kept.push(`/request/headers/${name.replaceAll('~', '~0').replaceAll('/', '~1')}`)
      }
    }
    request.headers = headers
  }
  return { ...incoming, request }
}

function isObject (value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
