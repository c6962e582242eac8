import type { JSX } from 'preact'
import { useEffect, useMemo, useState } from 'preact/hooks'
import { accountPath, call, can, enc } from '../api'
import { Chart } from '../chart'
import { ConditionBuilder, type Condition } from '../condition'
import { lagNote, loadReport, seriesOf, timesOf } from '../report-data'
import { Field, Loaded, Outcome, Page, Table, useAction, useLoad, type Column } from '../ui'
import { ruleText } from '../rule-text'
import { PeopleTable, scanNote, type PersonRow, type ScanState } from '../people-list'

interface Segment { name: string, description?: string, rule?: Condition, members?: number }

/** Member counts move as visitors enter and leave: the list and the chart refresh on their own. */
const REFRESH_MS = 5000

function useRefresh (reload: () => void): void {
  useEffect(() => {
    const timer = setInterval(reload, REFRESH_MS)
    return () => clearInterval(timer)
  }, [reload])
}

export function Audiences (): JSX.Element {
  const load = useLoad(() => call<{ segments: Segment[] }>('GET', accountPath('/segments')), [])
  useRefresh(load.reload)
  const [editing, setEditing] = useState<Segment | null>(null)
  const remove = useAction(async (name: string) => {
    if (!confirm(`Delete the segment ${name}?`)) return
    await call('DELETE', accountPath(`/segments/${enc(name)}`))
    load.reload()
    return `Deleted ${name}.`
  })
  const editable = can('editor')
  return (
    <Page title='Audiences' actions={editable && <button type='button' onClick={() => setEditing({ name: '', rule: { fact: 'count', op: 'gte', value: 1, event: 'pageView', within: '7d' } })}>New segment</button>}>
      {editing !== null && <SegmentForm key={editing.name} initial={editing} onDone={() => { setEditing(null); load.reload() }} />}
      <Outcome action={remove} />
      <Loaded load={load} what='segments'>{({ segments }) => {
        const columns = (kind: 'computed' | 'manual'): Column<Segment>[] => [
          { head: 'Segment', cell: s => <strong>{s.name}</strong> },
          { head: 'Members', num: true, cell: s => <span class='members' data-segment={s.name}>{s.members?.toLocaleString('en-US') ?? '—'}</span> },
          { head: 'Description', cell: s => s.description ?? '' },
          kind === 'computed'
            ? { head: 'Rule', cell: s => <span class='rule-text'>Visitors who {ruleText(s.rule)}</span> }
            : { head: 'Rule', cell: () => 'None: your site or backend adds and removes its members' },
          {
            head: 'Actions', cell: s => editable && <span class='row'>
              <button type='button' class='secondary' onClick={() => setEditing(s)} aria-label={`Edit ${s.name}`}>Edit</button>
              <button type='button' class='danger' onClick={() => remove.run(s.name)} aria-label={`Delete ${s.name}`}>Delete</button>
            </span>
          },
        ]
        return (
          <>
            <h2>Computed segments</h2>
            <p class='note'>Beacon keeps their members up to date from each visitor's behaviour and attributes.</p>
            <Table caption='Computed segments' rows={segments.filter(s => s.rule !== undefined)} empty='No computed segments yet.' columns={columns('computed')} />
            <h2>Manual segments</h2>
            <p class='note'>Members are assigned and removed through the public API (a segment without a rule).</p>
            <Table caption='Manual segments' rows={segments.filter(s => s.rule === undefined)} empty='No manual segments yet: save a segment without a rule.' columns={columns('manual')} />
          </>
        )
      }}
      </Loaded>
      <ChangesChart />
    </Page>
  )
}

function SegmentForm ({ initial, onDone }: { initial: Segment, onDone: () => void }): JSX.Element {
  const isNew = initial.name === ''
  const [name, setName] = useState(initial.name)
  const [description, setDescription] = useState(initial.description ?? '')
  const [rule, setRule] = useState<Condition | undefined>(initial.rule)
  const [backfill, setBackfill] = useState(false)
  const save = useAction(async () => {
    await call('PUT', accountPath(`/segments/${enc(name)}`), { ...(description === '' ? {} : { description }), ...(rule === undefined ? {} : { rule, ...(backfill ? { backfill } : {}) }) })
    onDone()
  })
  return (
    <form class='card' onSubmit={save.run} aria-label={isNew ? 'New segment' : `Edit ${name}`}>
      <div class='grid'>
        <Field label='Segment name' hint='Letters, digits, _ . : -'><input required disabled={!isNew} pattern='[A-Za-z0-9_.:\-]{1,128}' value={name} onInput={e => setName(e.currentTarget.value)} /></Field>
        <Field label='Description'><input value={description} onInput={e => setDescription(e.currentTarget.value)} /></Field>
      </div>
      <p class='note'>With a rule the segment is computed; without one it is manual (assigned through the public API).
        Behaviour facts: <code>count</code> of an event or <code>sum</code> of a field within a window (Nm, Nh, Nd).
      </p>
      <ConditionBuilder name='Segment rule' rule={rule} onChange={setRule} />
      <p class='rule-text' aria-live='polite'>{rule === undefined ? 'No rule: a manual segment.' : `Visitors who ${ruleText(rule)}.`}</p>
      {rule !== undefined && <MatchPreview rule={rule} description={description} />}
      {rule !== undefined && (
        <Field label='Backfill from the event log' hint='Evaluate it over the retained events, as if it had been there all along'>
          <input type='checkbox' checked={backfill} onChange={e => setBackfill(e.currentTarget.checked)} />
        </Field>
      )}
      <div class='row'>
        <button type='submit' disabled={save.busy}>Save segment</button>
        <button type='button' class='secondary' onClick={onDone}>Cancel</button>
      </div>
      <Outcome action={save} />
    </form>
  )
}

interface PreviewPage extends ScanState { matches: number, sample: PersonRow[], windowsRecorded: boolean }

/** Who the rule as it stands (unsaved) matches now: a count and a sample; "Count further" goes on where the scan stopped. */
function MatchPreview ({ rule, description }: { rule: Condition, description: string }): JSX.Element {
  const [shown, setShown] = useState<{ rule: Condition, page: PreviewPage } | null>(null)
  const preview = useAction(async (more: boolean) => {
    const cursor = more && shown !== null && shown.page.next !== null ? `?cursor=${enc(shown.page.next)}` : ''
    const page = await call<PreviewPage>('POST', accountPath(`/segments-preview${cursor}`), { ...(description === '' ? {} : { description }), rule })
    if (!more || shown === null) return setShown({ rule, page })
    setShown({ rule, page: { ...page, matches: shown.page.matches + page.matches, scanned: shown.page.scanned + page.scanned, sample: [...shown.page.sample, ...page.sample].slice(0, 10) } })
  })
  const stale = shown !== null && shown.rule !== rule
  return (
    <section class='match-preview' aria-labelledby='match-preview-title'>
      <h3 id='match-preview-title'>Who matches now</h3>
      <div class='row'>
        <button type='button' class='secondary' disabled={preview.busy} onClick={() => preview.run(false)}>Preview matches</button>
        {shown !== null && !shown.page.complete && !stale && <button type='button' class='secondary' disabled={preview.busy} onClick={() => preview.run(true)}>Count further</button>}
      </div>
      <Outcome action={preview} />
      {shown !== null && <>
        <p class='preview-count' role='status'>
          <strong>{shown.page.matches.toLocaleString('en-US')}</strong> visitor{shown.page.matches === 1 ? '' : 's'} match{shown.page.matches === 1 ? 'es' : ''}{shown.page.complete ? '' : ' so far'}. {scanNote(shown.page.scanned, shown.page.complete)}
          {stale && ' The rule changed since: preview again.'}
        </p>
        {!shown.page.windowsRecorded && <p class='note'>This rule counts events over a window no saved segment records yet: past events are not counted, so those conditions read 0 until the segment is saved.</p>}
        <PeopleTable caption='Sample of matching visitors' rows={shown.page.sample} empty='No visitor matches among those examined.' />
      </>}
    </section>
  )
}

function ChangesChart (): JSX.Element {
  const range = useMemo(() => {
    const to = new Date(Math.ceil(Date.now() / 3_600_000) * 3_600_000)
    return { from: new Date(to.getTime() - 48 * 3_600_000), to }
  }, [])
  const load = useLoad(() => loadReport(range.from, range.to, 'hour'), [range])
  useRefresh(load.reload)
  return (
    <section aria-labelledby='changes-title'>
      <h2 id='changes-title'>Enter and exit, last 48 hours</h2>
      <Loaded load={load} what='segment changes'>{report => <>
        <p class='note'>{lagNote(report.lagMs)}</p>
        <Chart
          title='Segment enters and exits per hour' times={timesOf(report.rows)}
          series={seriesOf(report.rows, row => Object.fromEntries(Object.entries(row.segments).flatMap(([name, c]) => [[`${name} enter`, c.enter], [`${name} exit`, c.exit]])))}
        />
      </>}
      </Loaded>
    </section>
  )
}
