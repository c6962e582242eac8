// The chaos run's checks (test/chaos/checker.ts) on hand-made histories: one that holds every check, and
// for each check histories that must fail it, and the unknown outcomes that must not fail any.

import { expect } from 'chai'
import { check, summaryOf, describeAnomalies, type Anomaly } from './checker.js'
import type { Entry, Observed, Value } from './history.js'

/** A history built step by step, each step one time unit after the last. */
class Builder {
  readonly entries: Entry[] = []
  private op = 0
  private clock = 0

  private tick (): number { return ++this.clock }

  invoke (f: 'write' | 'add' | 'read', key: string, value?: Value, extra: { idempotencyKey?: string, attempt?: number } = {}): number {
    const op = ++this.op
    this.entries.push({ type: 'invoke', op, time: this.tick(), f, key, node: 'node-1', ...(value === undefined ? {} : { value }), ...extra })
    return op
  }

  end (op: number, type: 'ok' | 'fail' | 'info', read?: Observed): this {
    this.entries.push({ type, op, time: this.tick(), ...(read === undefined ? {} : { read }) })
    return this
  }

  /** A write (or add) invoked and completed at once. */
  write (key: string, value: Value, type: 'ok' | 'fail' | 'info' = 'ok'): this {
    return this.end(this.invoke('write', key, value), type)
  }

  add (key: string, value: string, type: 'ok' | 'fail' | 'info' = 'ok'): this {
    return this.end(this.invoke('add', key, value, { idempotencyKey: `k-${value}`, attempt: 1 }), type)
  }

  read (entity: string, read: Observed): this {
    return this.end(this.invoke('read', entity), 'ok', read)
  }

  webhook (key: string, value: Value, webhookId: string): this {
    this.entries.push({ type: 'webhook', time: this.tick(), webhookId, key, value })
    return this
  }

  final (entity: string, read: Observed, node = 'node-1'): this {
    this.entries.push({ type: 'final', time: this.tick(), node, key: entity, read })
    return this
  }

  healthy (): this {
    for (const node of ['node-1', 'node-2', 'node-3']) this.entries.push({ type: 'health', time: this.tick(), node, ok: true, detail: 'answered in 12 ms, 64 partitions owned' })
    return this
  }
}

const V = 'v:aaaa'
const ORDERS = 'orders:aaaa'
const VISITOR = 'visitor:aaaa'

function visitor (v: Value | null, members: string[] = [], count = members.length): Observed {
  return { registers: { [V]: v }, sets: { [ORDERS]: { members, count } } }
}

function kinds (anomalies: Anomaly[]): string[] {
  return anomalies.map(anomaly => `${anomaly.check} ${anomaly.kind}`)
}

describe('chaos history checks', () => {
  it('passes a history where every check holds, and answers the summary line\'s counts', () => {
    const h = new Builder()
      .write(V, 1).webhook(V, 1, 'n1:1.hook')
      .read(VISITOR, visitor(1))
      .add(ORDERS, 'o-1').webhook(ORDERS, 'o-1', 'n1:2.hook').webhook(ORDERS, 'o-1', 'n1:2.hook')
      .write(V, 2).webhook(V, 2, 'n1:3.hook')
      .read(VISITOR, visitor(2, ['o-1']))
      .final(VISITOR, visitor(2, ['o-1'])).final(VISITOR, visitor(2, ['o-1']), 'node-2')
      .healthy()
    const verdict = check(h.entries)
    expect(verdict.anomalies).to.deep.equal([])
    expect(summaryOf(verdict, 7, 3)).to.deep.equal({
      ok: true, seed: 7, minutes: 3, ops: 5, acknowledged: 3, lost: 0, phantom: 0, staleReads: 0, duplicateWebhooks: 0, missingWebhooks: 0, unknown: 0,
    })
  })

  it('lets an unknown write be present or absent, and its retry with the same key count once', () => {
    const h = new Builder()
      .write(V, 1).webhook(V, 1, 'w1')
      .write(V, 2, 'info')
      .add(ORDERS, 'o-1', 'info').add(ORDERS, 'o-1', 'ok').webhook(ORDERS, 'o-1', 'w2')
      .add(ORDERS, 'o-2', 'info')
      .read(VISITOR, visitor(1, ['o-1']))
      .read(VISITOR, visitor(2, ['o-1', 'o-2']))
      .final(VISITOR, visitor(2, ['o-1'])).final(VISITOR, visitor(1, ['o-1', 'o-2']), 'node-2')
      .healthy()
    const verdict = check(h.entries)
    expect(verdict.anomalies).to.deep.equal([])
    expect(verdict.unknown).to.equal(3)
    expect(verdict.acknowledged).to.equal(2)
  })

  describe('check 1: every acknowledged write in the final state', () => {
    it('fails a register whose final value is older than its last acknowledged one', () => {
      const h = new Builder().write(V, 1).write(V, 2).webhook(V, 1, 'w1').webhook(V, 2, 'w2').final(VISITOR, visitor(1)).healthy()
      expect(kinds(check(h.entries).anomalies)).to.deep.equal(['1 lost'])
    })

    it('fails a register acknowledged but empty at the end, and one never read back', () => {
      const h = new Builder().write(V, 1).webhook(V, 1, 'w1').final(VISITOR, visitor(null)).write('p:x', 5).webhook('p:x', 5, 'w2').healthy()
      const verdict = check(h.entries)
      expect(kinds(verdict.anomalies)).to.deep.equal(['1 lost', '1 lost'])
      expect(verdict.anomalies[1]!.detail).to.contain('never read back')
    })

    it('fails an acknowledged purchase missing, and a purchase counted twice', () => {
      const missing = new Builder().add(ORDERS, 'o-1').webhook(ORDERS, 'o-1', 'w1').final(VISITOR, visitor(null, [])).healthy()
      expect(kinds(check(missing.entries).anomalies)).to.deep.equal(['1 lost'])
      const twice = new Builder().add(ORDERS, 'o-1', 'info').add(ORDERS, 'o-1').webhook(ORDERS, 'o-1', 'w1').final(VISITOR, visitor(null, ['o-1'], 2)).healthy()
      expect(kinds(check(twice.entries).anomalies)).to.deep.equal(['1 phantom'])
    })

    it('counts a key lost once however many nodes read it back wrong', () => {
      const h = new Builder().write(V, 1).webhook(V, 1, 'w1').final(VISITOR, visitor(null)).final(VISITOR, visitor(null), 'node-2').healthy()
      const verdict = check(h.entries)
      expect(verdict.lost).to.equal(1)
      expect(verdict.anomalies[0]!.detail).to.contain('node-1').and.contain('node-2')
    })
  })

  describe('check 2: nothing refused is present', () => {
    it('fails a refused write seen by a read or at the end', () => {
      const read = new Builder().write(V, 1).write(V, 2, 'fail').webhook(V, 1, 'w1').read(VISITOR, visitor(2)).final(VISITOR, visitor(1)).healthy()
      expect(kinds(check(read.entries).anomalies)).to.deep.equal(['2 phantom'])
      const final = new Builder().write(V, 1).write(V, 2, 'fail').webhook(V, 1, 'w1').final(VISITOR, visitor(2)).healthy()
      expect(kinds(check(final.entries).anomalies)).to.deep.equal(['2 phantom'])
    })

    it('fails a purchase refused every time yet present, a value never written, and a refused write\'s webhook', () => {
      const refused = new Builder().add(ORDERS, 'o-1', 'fail').add(ORDERS, 'o-1', 'fail').final(VISITOR, visitor(null, ['o-1'])).healthy()
      expect(kinds(check(refused.entries).anomalies)).to.deep.equal(['2 phantom'])
      const invented = new Builder().final(VISITOR, visitor(9)).healthy()
      expect(kinds(check(invented.entries).anomalies)).to.deep.equal(['2 phantom'])
      const hook = new Builder().write(V, 1, 'fail').webhook(V, 1, 'w1').final(VISITOR, visitor(null)).healthy()
      expect(kinds(check(hook.entries).anomalies)).to.deep.equal(['2 phantom'])
    })

    it('passes a purchase refused once and unknown once, present', () => {
      const h = new Builder().add(ORDERS, 'o-1', 'fail').add(ORDERS, 'o-1', 'info').final(VISITOR, visitor(null, ['o-1'])).webhook(ORDERS, 'o-1', 'w1').healthy()
      expect(check(h.entries).anomalies).to.deep.equal([])
    })
  })

  describe('check 3: a read after an acknowledgement sees it or newer', () => {
    it('fails a read invoked after the acknowledgement that sees an older value or none', () => {
      const older = new Builder().write(V, 1).write(V, 2).webhook(V, 1, 'w1').webhook(V, 2, 'w2').read(VISITOR, visitor(1)).final(VISITOR, visitor(2)).healthy()
      expect(kinds(check(older.entries).anomalies)).to.deep.equal(['3 staleReads'])
      const empty = new Builder().write(V, 1).webhook(V, 1, 'w1').read(VISITOR, visitor(null)).final(VISITOR, visitor(1)).healthy()
      expect(kinds(check(empty.entries).anomalies)).to.deep.equal(['3 staleReads'])
    })

    it('fails a read lacking a purchase acknowledged before it', () => {
      const h = new Builder().add(ORDERS, 'o-1').webhook(ORDERS, 'o-1', 'w1').read(VISITOR, visitor(null, [])).final(VISITOR, visitor(null, ['o-1'])).healthy()
      expect(kinds(check(h.entries).anomalies)).to.deep.equal(['3 staleReads'])
    })

    it('passes a read concurrent with the write, whichever value it sees', () => {
      const h = new Builder()
      h.write(V, 1).webhook(V, 1, 'w1')
      const read = h.invoke('read', VISITOR)
      const write = h.invoke('write', V, 2)
      h.end(write, 'ok').end(read, 'ok', visitor(1)).webhook(V, 2, 'w2').final(VISITOR, visitor(2)).healthy()
      expect(check(h.entries).anomalies).to.deep.equal([])
    })

    it('fails a read that sees a value written only after it was answered', () => {
      const h = new Builder()
      const read = h.invoke('read', VISITOR)
      h.end(read, 'ok', visitor(1)).write(V, 1).webhook(V, 1, 'w1').final(VISITOR, visitor(1)).healthy()
      expect(kinds(check(h.entries).anomalies)).to.deep.equal(['2 phantom'])
    })
  })

  describe('check 4: webhooks', () => {
    it('fails an acknowledged write without a webhook, and passes an unknown one without', () => {
      const h = new Builder().write(V, 1).write(V, 2, 'info').final(VISITOR, visitor(2)).healthy()
      expect(kinds(check(h.entries).anomalies)).to.deep.equal(['4 missingWebhooks'])
    })

    it('fails a write delivered under two webhook-ids (an unknown one too), and passes one delivered twice under one id', () => {
      const h = new Builder().write(V, 1, 'info').webhook(V, 1, 'a:1.hook').webhook(V, 1, 'b:7.hook').final(VISITOR, visitor(1)).healthy()
      expect(kinds(check(h.entries).anomalies)).to.deep.equal(['4 duplicateWebhooks'])
      const again = new Builder().add(ORDERS, 'o-1').webhook(ORDERS, 'o-1', 'a:1.hook').webhook(ORDERS, 'o-1', 'a:1.hook').final(VISITOR, visitor(null, ['o-1'])).healthy()
      expect(check(again.entries).anomalies).to.deep.equal([])
    })

    it('expects no webhook for identify calls (link registers)', () => {
      const h = new Builder().write('link:aaaa', 'p1').final(VISITOR, { registers: { 'link:aaaa': 'p1' }, sets: {} }).healthy()
      expect(check(h.entries).anomalies).to.deep.equal([])
    })
  })

  describe('check 5: every node healthy after the nemesis', () => {
    it('fails a node that did not answer, and a history without the health check', () => {
      const h = new Builder().healthy()
      h.entries.push({ type: 'health', time: 99, node: 'node-2', ok: false, detail: 'GET /admin/cluster: no answer within 10 s' })
      const verdict = check(h.entries)
      expect(kinds(verdict.anomalies)).to.deep.equal(['5 unhealthy'])
      expect(verdict.ok).to.equal(false)
      expect(kinds(check(new Builder().entries).anomalies)).to.deep.equal(['5 unhealthy'])
    })
  })

  it('prints each offending key with its history', () => {
    const h = new Builder().write(V, 1).write(V, 2).webhook(V, 1, 'w1').webhook(V, 2, 'w2').final(VISITOR, visitor(1)).healthy()
    const lines = describeAnomalies(check(h.entries), h.entries)
    expect(lines[0]).to.equal('check 1 (lost) v:aaaa: the final read through node-1 saw 1, acknowledged 2 after it')
    expect(lines[1]).to.match(/^history of v:aaaa \(\d+ entries/)
    expect(lines.filter(line => line.includes('"type":"invoke"'))).to.have.length(2)
    expect(lines.some(line => line.includes('"type":"final"'))).to.equal(true)
  })
})
