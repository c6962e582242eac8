// The subjects and message ids of the delivery stream: `<prefix>.<account>.<webhook>` for new records,
// the same plus `.r` for records waiting for a retry (both tokens base64url, so an id holding '.', '*'
// or '>' stays one token).

import type { DeliveryRecord } from '../record.js'
import { SUBJECTS_CACHED_MAX } from '../limits.js'

/** The last token of the subjects whose records wait for a retry (or for room in their worker). */
export const RETRY_TOKEN = 'r'

/** One subject token for any string: base64url has no '.', '*', '>' or whitespace. */
export function subjectToken (text: string): string {
  return text === '' ? '_' : Buffer.from(text, 'utf8').toString('base64url')
}

/** The message id that makes a re-publish of the same record a duplicate, and a replay not one. */
export function messageIdOf (record: DeliveryRecord, nodeId = ''): string {
  const id = record.replayedAtMs === null ? record.id : `${record.id}@${record.replayedAtMs}`
  return nodeId === '' ? id : `${nodeId}:${id}`
}

/** The account part of a webhook subject (`<prefix>.<account>`). */
export function accountOf (subject: string): string {
  return subject.slice(0, subject.lastIndexOf('.'))
}

export function validateSubjectPrefix (prefix: string): void {
  if (prefix === '' || prefix.split('.').some(token => token === '' || /[\s*>]/.test(token))) {
    throw new Error(`JetStreamQueue: subject prefix ${JSON.stringify(prefix)} is not a valid subject (dot-separated tokens without spaces, '*' or '>')`)
  }
}

/** The subject of each record's webhook, cached (records come in runs of one webhook). */
export class Subjects {
  readonly prefix: string
  /** Subjects by account and webhook (bounded: cleared when it grows past SUBJECTS_CACHED_MAX). */
  private readonly subjects = new Map<string, string>()
  private lastAccount: string | null = null
  private lastWebhook = ''
  private last = ''

  constructor (prefix: string) {
    validateSubjectPrefix(prefix)
    this.prefix = prefix
  }

  of (record: DeliveryRecord): string {
    if (record.account === this.lastAccount && record.webhookId === this.lastWebhook) return this.last
    const key = record.account + '\u0000' + record.webhookId
    let subject = this.subjects.get(key)
    if (subject === undefined) {
      subject = `${this.prefix}.${subjectToken(record.account)}.${subjectToken(record.webhookId)}`
      if (this.subjects.size >= SUBJECTS_CACHED_MAX) this.subjects.clear()
      this.subjects.set(key, subject)
    }
    this.lastAccount = record.account
    this.lastWebhook = record.webhookId
    this.last = subject
    return subject
  }
}
