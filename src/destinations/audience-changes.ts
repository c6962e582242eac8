// An audience batch as adds and removes: each person's last change in the batch wins (an enter then an
// exit in one batch is a remove), people keyed by their external id. An erased member ('erase') is a remove.

import type { Prepared } from './provider.js'

export interface AudienceChanges {
  /** By audience (segment id). */
  adds: Map<string, Prepared[]>
  removes: Map<string, Prepared[]>
}

export function audienceChanges (batch: readonly Prepared[]): AudienceChanges {
  const last = new Map<string, Prepared>()
  for (const prepared of batch) {
    const context = prepared.item.context
    last.set(`${context.audience ?? ''}\u0000${prepared.ids.externalId ?? prepared.item.id}`, prepared)
  }
  const changes: AudienceChanges = { adds: new Map(), removes: new Map() }
  for (const prepared of last.values()) {
    const context = prepared.item.context
    const into = context.change === 'enter' ? changes.adds : changes.removes
    const audience = context.audience ?? ''
    const list = into.get(audience)
    if (list === undefined) into.set(audience, [prepared])
    else list.push(prepared)
  }
  return changes
}
