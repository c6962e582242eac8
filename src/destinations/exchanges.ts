// The recent exchanges of one destination (its delivery log's request and answer), masked: values of
// credential-looking keys (access_token=…, "api_key": …), bearer tokens, and any email address or long
// digit run left in clear (a provider that takes them unhashed, an answer that echoes them).

import { maskCredentials } from '../webhooks/mask-credentials.js'
import { DESTINATION_LIMITS } from './limits.js'

export interface Exchange {
  atMs: number
  items: number
  outcome: 'delivered' | 'retry' | 'terminal'
  status: number | null
  request: string
  answer: string
  error: string | null
  test: boolean
}

const EMAIL = /[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}/g
const PHONE = /\+\d[\d ().-]{6,}\d/g

/** Credentials, email addresses and phone-like digit runs masked; clipped. */
export function maskExchangeText (text: string): string {
  const masked = maskCredentials(text).replace(EMAIL, '***@***').replace(PHONE, '***')
  const max = DESTINATION_LIMITS.exchangeExcerptLengthMax
  return masked.length <= max ? masked : masked.slice(0, max - 1) + '…'
}

export class Exchanges {
  private readonly kept: Exchange[] = []
  private readonly max: number

  constructor (max: number) {
    this.max = max
  }

  add (exchange: Exchange): Exchange {
    const masked = { ...exchange, request: maskExchangeText(exchange.request), answer: maskExchangeText(exchange.answer), error: exchange.error === null ? null : maskExchangeText(exchange.error) }
    this.kept.push(masked)
    if (this.kept.length > this.max) this.kept.shift()
    return masked
  }

  /** Newest first. */
  list (): Exchange[] {
    return [...this.kept].reverse()
  }
}
