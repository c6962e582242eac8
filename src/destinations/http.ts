// The HTTP client of the destinations: one undici Agent whose connections go through the webhook SSRF
// guard (guardedLookup: the address actually connected to is checked) unless private targets are
// allowed, a timeout per exchange, answers read whole up to a limit (a provider's answer says which
// items failed). Failures that are not answers are thrown as HttpFailure with the webhook error codes.

import { performance } from 'node:perf_hooks'
import { Agent, type Dispatcher } from 'undici'
import { guardedLookup, literalRefusal, TARGET_REFUSED_CODE } from '../webhooks/ssrf.js'
import type { SendErrorCode } from '../webhooks/types.js'
import { DESTINATION_LIMITS } from './limits.js'

export interface ProviderRequest {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'
  url: string
  headers?: Record<string, string>
  body?: string
}

export interface ProviderAnswer {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: string
  latencyMs: number
}

export class HttpFailure extends Error {
  readonly code: SendErrorCode
  readonly retryable: boolean
  constructor (code: SendErrorCode, message: string) {
    super(message)
    this.code = code
    this.retryable = code === 'timeout' || code === 'connection'
  }
}

export interface ProviderHttp {
  call (request: ProviderRequest, timeoutMs: number): Promise<ProviderAnswer>
  close (): Promise<void>
}

export class UndiciProviderHttp implements ProviderHttp {
  private readonly agent: Agent
  private readonly allowPrivate: boolean

  constructor (allowPrivate: boolean) {
    this.allowPrivate = allowPrivate
    this.agent = new Agent({ connections: DESTINATION_LIMITS.connectionsPerOrigin, connect: allowPrivate ? {} : { lookup: guardedLookup } })
  }

  async call (request: ProviderRequest, timeoutMs: number): Promise<ProviderAnswer> {
    const url = new URL(request.url)
    if (!this.allowPrivate) {
      const refused = literalRefusal(url.hostname)
      if (refused !== null) throw new HttpFailure('refused', refused.message.replace('webhook target', 'destination'))
    }
    const started = performance.now()
    const abort = new AbortController()
    const timer = setTimeout(() => abort.abort(), timeoutMs)
    try {
      const answer = await this.agent.request({
        origin: url.origin, path: url.pathname + url.search, method: request.method,
        headers: { 'user-agent': DESTINATION_LIMITS.userAgent, ...(request.body === undefined ? {} : { 'content-type': 'application/json' }), ...request.headers },
        body: request.body ?? null, signal: abort.signal,
      } as Dispatcher.RequestOptions)
      const body = await readCapped(answer.body)
      return { status: answer.statusCode, headers: answer.headers, body, latencyMs: Math.round((performance.now() - started) * 10) / 10 }
    } catch (error) {
      if (abort.signal.aborted) throw new HttpFailure('timeout', `timed out after ${timeoutMs} ms`)
      const code = (error as { code?: unknown } | null)?.code
      if (code === TARGET_REFUSED_CODE) throw new HttpFailure('refused', (error as Error).message.replace('webhook target', 'destination'))
      if (code === 'UND_ERR_INVALID_ARG') throw new HttpFailure('invalid_request', (error as Error).message)
      throw new HttpFailure('connection', error instanceof Error ? error.message : String(error))
    } finally {
      clearTimeout(timer)
    }
  }

  close (): Promise<void> {
    return this.agent.close()
  }
}

async function readCapped (body: Dispatcher.ResponseData['body']): Promise<string> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of body) {
    size += (chunk as Buffer).length
    if (size > DESTINATION_LIMITS.answerSizeMaxBytes) {
      body.destroy()
      break
    }
    chunks.push(chunk as Buffer)
  }
  return Buffer.concat(chunks).toString('utf8')
}
