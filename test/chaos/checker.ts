// The checks of a chaos run over its history (test/chaos/history.ts), the five of issue 26:
//   1. every acknowledged write is in the final state: a register holds its last acknowledged value or
//      one written after it; a set holds every acknowledged element, and its count equals its elements
//      (each purchase counted exactly once);
//   2. no write that got a definite refusal is present (in a read, the final state, or a webhook), and
//      nothing is present that was never written;
//   3. a read invoked after a write's acknowledgement (through any node) sees it or something newer;
//   4. every acknowledged write's webhook arrived, and no write arrived under two webhook-ids;
//   5. after the nemesis stopped, every node answered within 10 s with every partition owned.
//
// The rules of evidence are Jepsen's: an operation answered `ok` happened; `fail` did not; `info` (or no
// answer at all) may have happened or not, at any time after its invocation, so its value is allowed
// anywhere a later write's is, and never counted missing. Writes to one key are made one at a time by
// the runner, so the order of a register's writes is their invocation order, and "newer" means later
// in it. Values are unique per key (a register's) or per set (an order id), so a value read names the
// write that produced it.

import type { Complete, Delivery, Entry, Final, Health, Invoke, Observed, Value } from './history.js'

export type Check = 1 | 2 | 3 | 4 | 5

export interface Anomaly {
  check: Check
  /** The counter of the summary it adds to. */
  kind: 'lost' | 'phantom' | 'staleReads' | 'duplicateWebhooks' | 'missingWebhooks' | 'unhealthy'
  key: string
  detail: string
}

export interface Verdict {
  ok: boolean
  /** Operations invoked (reads, writes, purchases and their retries). */
  ops: number
  /** Write and purchase operations answered ok. */
  acknowledged: number
  lost: number
  phantom: number
  staleReads: number
  duplicateWebhooks: number
  missingWebhooks: number
  /** Operations whose outcome is unknown (info, or never answered). */
  unknown: number
  anomalies: Anomaly[]
}

type Status = 'ok' | 'fail' | 'info'

/** One write, or one set element with all its attempts folded together. */
interface Write {
  value: Value
  /** The first invocation. */
  invokedAt: number
  status: Status
  /** When it was first acknowledged (Infinity: never). */
  ackedAt: number
}

/** Registers whose writes send a webhook (`link:` does not: identify calls are page views). */
const WEBHOOK_REGISTER = /^(v|p):/

export function check (entries: Entry[]): Verdict {
  const invokes = new Map<number, Invoke>()
  const completions = new Map<number, Complete>()
  for (const entry of entries) {
    if (entry.type === 'invoke') invokes.set(entry.op, entry)
    else if (entry.type === 'ok' || entry.type === 'fail' || entry.type === 'info') completions.set(entry.op, entry)
  }
  const statusOf = (op: number): Status => completions.get(op)?.type ?? 'info'

  const registers = new Map<string, Write[]>()
  const sets = new Map<string, Map<string, Write>>()
  let acknowledged = 0
  let unknown = 0
  for (const invoke of invokes.values()) {
    const status = statusOf(invoke.op)
    if (status === 'info') unknown++
    if (invoke.f === 'read') continue
    if (status === 'ok') acknowledged++
    const ackedAt = status === 'ok' ? completions.get(invoke.op)!.time : Infinity
    if (invoke.f === 'write') {
      const writes = registers.get(invoke.key) ?? []
      if (writes.some(write => write.value === invoke.value)) throw new Error(`history: the value ${String(invoke.value)} is written twice to ${invoke.key}`)
      writes.push({ value: invoke.value!, invokedAt: invoke.time, status, ackedAt })
      registers.set(invoke.key, writes)
    } else {
      const set = sets.get(invoke.key) ?? new Map<string, Write>()
      const value = String(invoke.value)
      const element = set.get(value)
      if (element === undefined) set.set(value, { value, invokedAt: invoke.time, status, ackedAt })
      else {
        // Attempts fold: acknowledged if any was; refused only if every attempt was.
        element.status = element.status === 'ok' || status === 'ok' ? 'ok' : element.status === 'fail' && status === 'fail' ? 'fail' : 'info'
        element.ackedAt = Math.min(element.ackedAt, ackedAt)
      }
      sets.set(invoke.key, set)
    }
  }
  for (const writes of registers.values()) writes.sort((a, b) => a.invokedAt - b.invokedAt)

  const anomalies: Anomaly[] = []
  const found = (anomaly: Anomaly): void => { anomalies.push(anomaly) }
  const report = found
  /** What the final reads found, one anomaly per key and kind (however many nodes saw it). */
  const atEnd = new Map<string, Anomaly>()
  const foundAtEnd = (anomaly: Anomaly): void => {
    const id = `${anomaly.kind} ${anomaly.key}`
    const earlier = atEnd.get(id)
    if (earlier === undefined) atEnd.set(id, anomaly)
    else earlier.detail += `; ${anomaly.detail}`
  }

  /** A register's value seen by a read (invoked at `from`, answered at `to`) or the final read (from = to = Infinity). */
  const seeRegister = (key: string, seen: Value | null, from: number, to: number, final: boolean, where: string): void => {
    const found = final ? foundAtEnd : report
    const writes = registers.get(key) ?? []
    let lastAcked = -1
    for (const [i, write] of writes.entries()) if (write.ackedAt < from) lastAcked = i
    const expected = lastAcked < 0 ? 'nothing acknowledged' : `acknowledged ${String(writes[lastAcked]!.value)}`
    if (seen === null) {
      if (lastAcked >= 0) found({ check: final ? 1 : 3, kind: final ? 'lost' : 'staleReads', key, detail: `${where} saw no value, ${expected}` })
      return
    }
    const index = writes.findIndex(write => write.value === seen)
    const write = writes[index]
    if (write === undefined) found({ check: 2, kind: 'phantom', key, detail: `${where} saw ${String(seen)}, never written` })
    else if (write.status === 'fail') found({ check: 2, kind: 'phantom', key, detail: `${where} saw ${String(seen)}, whose write was refused` })
    else if (write.invokedAt > to) found({ check: 2, kind: 'phantom', key, detail: `${where} saw ${String(seen)}, written only after the read was answered` })
    else if (index < lastAcked) found({ check: final ? 1 : 3, kind: final ? 'lost' : 'staleReads', key, detail: `${where} saw ${String(seen)}, ${expected} after it` })
  }

  const seeSet = (key: string, seen: { members: string[], count: number }, from: number, to: number, final: boolean, where: string): void => {
    const found = final ? foundAtEnd : report
    const set = sets.get(key) ?? new Map<string, Write>()
    const members = new Set(seen.members)
    for (const member of members) {
      const element = set.get(member)
      if (element === undefined) found({ check: 2, kind: 'phantom', key, detail: `${where} saw ${member}, never sent` })
      else if (element.status === 'fail') found({ check: 2, kind: 'phantom', key, detail: `${where} saw ${member}, refused every time it was sent` })
      else if (element.invokedAt > to) found({ check: 2, kind: 'phantom', key, detail: `${where} saw ${member}, sent only after the read was answered` })
    }
    for (const element of set.values()) {
      if (element.ackedAt < from && !members.has(String(element.value))) {
        found({ check: final ? 1 : 3, kind: final ? 'lost' : 'staleReads', key, detail: `${where} lacks ${String(element.value)}, acknowledged` })
      }
    }
    if (seen.count > members.size) found({ check: 1, kind: 'phantom', key, detail: `${where} counts ${seen.count} purchases for ${members.size} order ids: one counted more than once` })
    else if (final && seen.count < members.size) found({ check: 1, kind: 'lost', key, detail: `${where} counts ${seen.count} purchases for ${members.size} order ids` })
  }

  const see = (observed: Observed, from: number, to: number, final: boolean, where: string): void => {
    for (const [key, value] of Object.entries(observed.registers)) seeRegister(key, value, from, to, final, where)
    for (const [key, value] of Object.entries(observed.sets)) seeSet(key, value, from, to, final, where)
  }

  // Check 3 (and 2): every read answered.
  for (const invoke of invokes.values()) {
    const completion = completions.get(invoke.op)
    if (invoke.f !== 'read' || completion?.type !== 'ok' || completion.read === undefined) continue
    see(completion.read, invoke.time, completion.time, false, `read ${invoke.op} through ${invoke.node} (invoked ${invoke.time}, answered ${completion.time})`)
  }

  // Checks 1 and 2: the final state, through every node that read it back.
  const finals = entries.filter((entry): entry is Final => entry.type === 'final')
  const finalKeys = new Set<string>()
  for (const final of finals) {
    if (final.read === undefined) {
      foundAtEnd({ check: 1, kind: 'lost', key: final.key, detail: `the final read through ${final.node} failed: ${final.error ?? 'no answer'}` })
      continue
    }
    for (const key of [...Object.keys(final.read.registers), ...Object.keys(final.read.sets)]) finalKeys.add(key)
    see(final.read, Infinity, Infinity, true, `the final read through ${final.node}`)
  }
  anomalies.push(...atEnd.values())
  // A key with an acknowledged write that no final read covered is not shown present.
  for (const [key, writes] of registers) {
    if (!finalKeys.has(key) && writes.some(write => write.status === 'ok')) found({ check: 1, kind: 'lost', key, detail: 'acknowledged, never read back at the end' })
  }
  for (const [key, set] of sets) {
    if (!finalKeys.has(key) && [...set.values()].some(element => element.status === 'ok')) found({ check: 1, kind: 'lost', key, detail: 'acknowledged, never read back at the end' })
  }

  // Check 4 (and 2): webhooks, matched to writes by key and value.
  const deliveries = new Map<string, { key: string, value: Value, ids: Set<string> }>()
  for (const entry of entries.filter((entry): entry is Delivery => entry.type === 'webhook')) {
    const id = `${entry.key}=${String(entry.value)}`
    const delivery = deliveries.get(id) ?? { key: entry.key, value: entry.value, ids: new Set<string>() }
    delivery.ids.add(entry.webhookId)
    deliveries.set(id, delivery)
  }
  const events = new Map<string, { key: string, write: Write }>()
  for (const [key, writes] of registers) if (WEBHOOK_REGISTER.test(key)) for (const write of writes) events.set(`${key}=${String(write.value)}`, { key, write })
  for (const [key, set] of sets) for (const element of set.values()) events.set(`${key}=${String(element.value)}`, { key, write: element })
  for (const [id, { key, write }] of events) {
    const delivery = deliveries.get(id)
    if (write.status === 'ok' && delivery === undefined) found({ check: 4, kind: 'missingWebhooks', key, detail: `no webhook for ${String(write.value)}, acknowledged` })
    if (delivery !== undefined && delivery.ids.size > 1) found({ check: 4, kind: 'duplicateWebhooks', key, detail: `${String(write.value)} arrived under ${delivery.ids.size} webhook-ids: ${[...delivery.ids].join(', ')}` })
    if (delivery !== undefined && write.status === 'fail') found({ check: 2, kind: 'phantom', key, detail: `a webhook for ${String(write.value)}, whose write was refused` })
  }
  for (const [id, delivery] of deliveries) {
    if (!events.has(id)) found({ check: 2, kind: 'phantom', key: delivery.key, detail: `a webhook for ${String(delivery.value)}, never written (webhook-id ${[...delivery.ids].join(', ')})` })
  }

  // Check 5.
  const health = entries.filter((entry): entry is Health => entry.type === 'health')
  if (health.length === 0) found({ check: 5, kind: 'unhealthy', key: 'cluster', detail: 'no health check after the nemesis stopped' })
  for (const entry of health) if (!entry.ok) found({ check: 5, kind: 'unhealthy', key: `node ${entry.node}`, detail: entry.detail })

  const count = (kind: Anomaly['kind']): number => anomalies.filter(anomaly => anomaly.kind === kind).length
  return {
    ok: anomalies.length === 0,
    ops: invokes.size,
    acknowledged,
    lost: count('lost'),
    phantom: count('phantom'),
    staleReads: count('staleReads'),
    duplicateWebhooks: count('duplicateWebhooks'),
    missingWebhooks: count('missingWebhooks'),
    unknown,
    anomalies,
  }
}

/** The summary line's object, in the issue's order of keys. */
export function summaryOf (verdict: Verdict, seed: number, minutes: number): Record<string, unknown> {
  const { ok, ops, acknowledged, lost, phantom, staleReads, duplicateWebhooks, missingWebhooks, unknown } = verdict
  return { ok, seed, minutes, ops, acknowledged, lost, phantom, staleReads, duplicateWebhooks, missingWebhooks, unknown }
}

/**
 * What a failure prints: each anomaly, then for each key named (up to `keysMax`) the history that
 * concerns it: its writes with their outcomes, the reads that saw it, the final reads, the webhooks.
 */
export function describeAnomalies (verdict: Verdict, entries: Entry[], keysMax = 20, linesMax = 60): string[] {
  const lines: string[] = []
  for (const anomaly of verdict.anomalies.slice(0, 200)) lines.push(`check ${anomaly.check} (${anomaly.kind}) ${anomaly.key}: ${anomaly.detail}`)
  if (verdict.anomalies.length > 200) lines.push(`… and ${verdict.anomalies.length - 200} more`)
  const keys = [...new Set(verdict.anomalies.map(anomaly => anomaly.key))].slice(0, keysMax)
  const invokes = new Map<number, Invoke>()
  for (const entry of entries) if (entry.type === 'invoke') invokes.set(entry.op, entry)
  for (const key of keys) {
    const concerns = (entry: Entry): boolean => {
      switch (entry.type) {
        case 'invoke': return entry.key === key || (entry.f === 'read' && sameEntity(entry.key, key))
        case 'ok': case 'fail': case 'info': {
          const invoke = invokes.get(entry.op)
          return invoke !== undefined && (invoke.key === key || (invoke.f === 'read' && sameEntity(invoke.key, key)))
        }
        case 'webhook': return entry.key === key
        case 'final': return sameEntity(entry.key, key)
        case 'nemesis': return true
        case 'health': return key.startsWith('node ') || key === 'cluster'
      }
      return false
    }
    const own = entries.filter(concerns)
    lines.push(`history of ${key} (${own.length} entries${own.length > linesMax ? `, the last ${linesMax}` : ''}, nemesis included):`)
    for (const entry of own.slice(-linesMax)) lines.push('  ' + JSON.stringify(entry.type === 'ok' || entry.type === 'fail' || entry.type === 'info' ? { ...entry, read: narrow(entry.read, key) } : entry.type === 'final' ? { ...entry, read: narrow(entry.read, key) } : entry))
  }
  return lines
}

/** Does a read of `entity` (`visitor:<id>`, `profile:<id>`) cover the register or set `key`? */
function sameEntity (entity: string, key: string): boolean {
  const id = key.slice(key.indexOf(':') + 1)
  return entity.slice(entity.indexOf(':') + 1) === id
}

/** Only `key`'s part of what a read saw. */
function narrow (observed: Observed | undefined, key: string): Observed | undefined {
  if (observed === undefined) return undefined
  const registers = key in observed.registers ? { [key]: observed.registers[key]! } : {}
  const sets = key in observed.sets ? { [key]: observed.sets[key]! } : {}
  return { registers, sets }
}
