// Fairness of the main consumer: the messages a node holds, counted by webhook subject and by account
// (the subject less its last token). With n webhooks (accounts) holding messages, this one counted,
// a share is max ack pending / (n + 1), so together they never hold all of it, and a webhook (account)
// holding none always finds room.

import { accountOf } from './subjects.js'

export class Shares {
  private readonly total: number
  /** Only those holding some are listed, so the sizes count the webhooks and accounts holding. */
  private readonly webhookHeld = new Map<string, number>()
  private readonly accountHeld = new Map<string, number>()

  constructor (total: number) {
    this.total = total
  }

  add (subject: string): void {
    count(this.webhookHeld, subject, 1)
    count(this.accountHeld, accountOf(subject), 1)
  }

  remove (subject: string): void {
    count(this.webhookHeld, subject, -1)
    count(this.accountHeld, accountOf(subject), -1)
  }

  /** Whether the webhook of this subject, or its account, holds its share already. */
  full (subject: string): boolean {
    return overShare(this.webhookHeld, subject, this.total) || overShare(this.accountHeld, accountOf(subject), this.total)
  }

  clear (): void {
    this.webhookHeld.clear()
    this.accountHeld.clear()
  }
}

function count (held: Map<string, number>, key: string, by: number): void {
  const n = (held.get(key) ?? 0) + by
  if (n <= 0) held.delete(key)
  else held.set(key, n)
}

function overShare (held: Map<string, number>, key: string, total: number): boolean {
  const mine = held.get(key) ?? 0
  const holding = held.size + (mine === 0 ? 1 : 0)
  return mine >= Math.max(1, Math.floor(total / (holding + 1)))
}
