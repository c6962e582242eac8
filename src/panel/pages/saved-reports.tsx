// Saved reports (docs/reports.md): build a report (metric, breakdown, filters, range, granularity),
// see its chart and totals before saving it (the preview computes without saving), save it, open a saved
// one, download its result as CSV. Viewers build and look; editors and owners save and delete.

import type { JSX } from 'preact'
import { useMemo, useState } from 'preact/hooks'
import { accountPath, call, can, enc } from '../api'
import { Chart, type Series } from '../chart'
import { Field, Loaded, Outcome, Page, Table, toList, fromList, useAction, useLoad } from '../ui'

type MetricType = 'events' | 'uniqueVisitors' | 'uniqueProfiles' | 'sum' | 'mean' | 'conversion'
type Dimension = 'kind' | 'campaign' | 'variant' | 'segment' | 'platform' | 'device' | 'path' | 'field'
type Granularity = 'hour' | 'day' | 'week'

interface Metric { type: MetricType, field?: string, from?: string, to?: string, windowHours?: number }
interface Filter { by: Dimension, field?: string, values: string[] }
interface Definition {
  name: string
  metric: Metric
  breakdown?: { by: Dimension, field?: string }
  filters?: Filter[]
  range: { lastDays: number } | { from: string, to: string }
  granularity: Granularity
  /** Scheduled delivery to a webhook (docs/reports.md): set through the API; the form keeps it as it is. */
  delivery?: Record<string, unknown>
}
interface SavedReport extends Definition { id: string, createdAt: string, updatedAt: string }
interface ResultRow { bucket: string, group: string | null, value: number, started?: number, converted?: number }
interface Result { rows: ResultRow[], totals: Array<{ group: string | null, value: number, started?: number, converted?: number }>, groupsOmitted: number, groupsOverlap: boolean, eventsRead: number, from: string, to: string }

const METRICS: Array<[MetricType, string]> = [
  ['events', 'Events'], ['uniqueVisitors', 'Unique visitors'], ['uniqueProfiles', 'Unique profiles'],
  ['sum', 'Sum of a field'], ['mean', 'Mean of a field'], ['conversion', 'Conversion'],
]
const DIMENSIONS: Array<[Dimension, string]> = [
  ['kind', 'Event type'], ['campaign', 'Campaign'], ['variant', 'Variant'], ['segment', 'Segment'], ['platform', 'Platform'],
  ['device', 'Device'], ['path', 'Path'], ['field', 'A custom field'],
]

/** The form's state: text as typed, turned into a definition on preview or save. */
interface Draft {
  id: string | null
  name: string
  metric: MetricType
  metricField: string
  from: string
  to: string
  windowHours: string
  breakdown: Dimension | ''
  breakdownField: string
  filters: Array<{ by: Dimension, field: string, values: string }>
  lastDays: string
  granularity: Granularity
  /** The saved report's delivery, sent back unchanged on save (a replacement without it would drop it). */
  delivery?: Record<string, unknown>
}

const EMPTY: Draft = {
  id: null, name: '', metric: 'uniqueVisitors', metricField: 'orderTotal', from: 'productView', to: 'purchase', windowHours: '24',
  breakdown: '', breakdownField: '', filters: [], lastDays: '7', granularity: 'day',
}

function definitionOf (draft: Draft): Definition {
  const metric: Metric = { type: draft.metric }
  if (draft.metric === 'sum' || draft.metric === 'mean') metric.field = draft.metricField.trim()
  if (draft.metric === 'conversion') Object.assign(metric, { from: draft.from.trim(), to: draft.to.trim(), windowHours: Number(draft.windowHours) })
  const def: Definition = { name: draft.name.trim() === '' ? 'Untitled report' : draft.name.trim(), metric, range: { lastDays: Number(draft.lastDays) }, granularity: draft.granularity }
  if (draft.breakdown !== '') def.breakdown = draft.breakdown === 'field' ? { by: 'field', field: draft.breakdownField.trim() } : { by: draft.breakdown }
  if (draft.delivery !== undefined) def.delivery = draft.delivery
  if (draft.filters.length > 0) def.filters = draft.filters.map(f => f.by === 'field' ? { by: 'field', field: f.field.trim(), values: toList(f.values) } : { by: f.by, values: toList(f.values) })
  return def
}

function draftOf (report: SavedReport): Draft {
  const m = report.metric
  return {
    id: report.id, name: report.name, metric: m.type, metricField: m.field ?? EMPTY.metricField, from: m.from ?? EMPTY.from, to: m.to ?? EMPTY.to,
    windowHours: String(m.windowHours ?? 24), breakdown: report.breakdown?.by ?? '', breakdownField: report.breakdown?.field ?? '',
    filters: (report.filters ?? []).map(f => ({ by: f.by, field: f.field ?? '', values: fromList(f.values) })),
    lastDays: 'lastDays' in report.range ? String(report.range.lastDays) : String(Math.max(1, Math.round((Date.parse(report.range.to) - Date.parse(report.range.from)) / 86_400_000))),
    granularity: report.granularity,
    ...(report.delivery === undefined ? {} : { delivery: report.delivery }),
  }
}

const format = (metric: MetricType, value: number): string =>
  metric === 'conversion' ? `${(100 * value).toFixed(1)} %` : metric === 'mean' ? value.toLocaleString('en-US', { maximumFractionDigits: 2 }) : value.toLocaleString('en-US')
const groupLabel = (group: string | null): string => group ?? '(none)'

export function SavedReports (): JSX.Element {
  const list = useLoad(() => call<{ savedReports: SavedReport[] }>('GET', accountPath('/saved-reports?limit=500')), [])
  const [draft, setDraft] = useState<Draft>(EMPTY)
  const [result, setResult] = useState<{ result: Result, metric: MetricType } | null>(null)
  const editable = can('editor')
  const set = (patch: Partial<Draft>): void => setDraft(d => ({ ...d, ...patch }))

  const preview = useAction(async () => {
    setResult({ result: await call<Result>('POST', accountPath('/saved-reports-preview'), definitionOf(draft)), metric: draft.metric })
  })
  const save = useAction(async () => {
    const def = definitionOf(draft)
    const saved = draft.id === null
      ? await call<SavedReport>('POST', accountPath('/saved-reports'), def)
      : await call<SavedReport>('PUT', accountPath(`/saved-reports/${enc(draft.id)}`), def)
    setDraft(draftOf(saved))
    list.reload()
    return `Saved ${saved.name}.`
  })
  const remove = useAction(async () => {
    if (draft.id === null || !confirm(`Delete the saved report ${draft.name}?`)) return
    await call('DELETE', accountPath(`/saved-reports/${enc(draft.id)}`))
    const name = draft.name
    setDraft(EMPTY)
    setResult(null)
    list.reload()
    return `Deleted ${name}.`
  })
  const open = useAction(async (report: SavedReport) => {
    setDraft(draftOf(report))
    setResult({ result: await call<Result>('GET', accountPath(`/saved-reports/${enc(report.id)}/result`)), metric: report.metric.type })
  })

  return (
    <Page title='Report builder' actions={<button type='button' class='secondary' onClick={() => { setDraft(EMPTY); setResult(null) }}>New report</button>}>
      <p class='note'>Reports computed from the retained event log, exactly (unique visitors are counted, not estimated). Build one, preview it, save it to open it again or download it as CSV.</p>
      <Loaded load={list} what='saved reports'>{({ savedReports }) => (
        <Table
          caption='Saved reports' rows={savedReports} empty='No saved report yet.'
          columns={[
            { head: 'Report', cell: r => <button type='button' class='link' onClick={() => open.run(r)} aria-label={`Open ${r.name}`}>{r.name}</button> },
            { head: 'Metric', cell: r => METRICS.find(([t]) => t === r.metric.type)?.[1] ?? r.metric.type },
            { head: 'CSV', cell: r => <a href={accountPath(`/saved-reports/${enc(r.id)}/result?format=csv`)} download={`${r.name}.csv`}>Download</a> },
          ]}
        />
      )}
      </Loaded>
      <Outcome action={open} />
      <form class='card' onSubmit={preview.run} aria-labelledby='builder'>
        <h2 id='builder'>{draft.id === null ? 'Build a report' : `Edit ${draft.name}`}</h2>
        <div class='grid'>
          <Field label='Name'><input maxLength={200} value={draft.name} onInput={e => set({ name: e.currentTarget.value })} /></Field>
          <Field label='Metric'>
            <select value={draft.metric} onChange={e => set({ metric: e.currentTarget.value as MetricType })}>
              {METRICS.map(([value, label]) => <option key={value} value={value}>{label}</option>)}
            </select>
          </Field>
          {(draft.metric === 'sum' || draft.metric === 'mean') && (
            <Field label='Numeric field' hint='e.g. orderTotal, price, a custom field'><input required value={draft.metricField} onInput={e => set({ metricField: e.currentTarget.value })} /></Field>
          )}
          {draft.metric === 'conversion' && <>
            <Field label='From event type'><input required value={draft.from} onInput={e => set({ from: e.currentTarget.value })} /></Field>
            <Field label='To event type'><input required value={draft.to} onInput={e => set({ to: e.currentTarget.value })} /></Field>
            <Field label='Within (hours)'><input type='number' min={1} max={2160} required value={draft.windowHours} onInput={e => set({ windowHours: e.currentTarget.value })} /></Field>
          </>}
          <Field label='Breakdown'>
            <select value={draft.breakdown} onChange={e => set({ breakdown: e.currentTarget.value as Dimension | '' })}>
              <option value=''>None</option>
              {DIMENSIONS.map(([value, label]) => <option key={value} value={value}>{label}</option>)}
            </select>
          </Field>
          {draft.breakdown === 'field' && <Field label='Breakdown field'><input required value={draft.breakdownField} onInput={e => set({ breakdownField: e.currentTarget.value })} /></Field>}
          <Field label='Last days'><input type='number' min={1} max={400} required value={draft.lastDays} onInput={e => set({ lastDays: e.currentTarget.value })} /></Field>
          <Field label='Granularity'>
            <select value={draft.granularity} onChange={e => set({ granularity: e.currentTarget.value as Granularity })}>
              <option value='hour'>per hour</option><option value='day'>per day</option><option value='week'>per week</option>
            </select>
          </Field>
        </div>
        <Filters draft={draft} set={set} />
        <div class='actions'>
          <button type='submit' class='secondary' disabled={preview.busy}>Preview</button>
          {editable && <button type='button' disabled={save.busy} onClick={() => save.run()}>{draft.id === null ? 'Save report' : 'Save changes'}</button>}
          {editable && draft.id !== null && <button type='button' class='danger' onClick={() => remove.run()}>Delete</button>}
          {draft.id !== null && <a class='button secondary' href={accountPath(`/saved-reports/${enc(draft.id)}/result?format=csv`)} download={`${draft.name}.csv`}>Download CSV</a>}
        </div>
        <Outcome action={preview} />
        <Outcome action={save} />
        <Outcome action={remove} />
      </form>
      {result !== null && <ResultView result={result.result} metric={result.metric} />}
    </Page>
  )
}

function Filters ({ draft, set }: { draft: Draft, set: (patch: Partial<Draft>) => void }): JSX.Element {
  const change = (i: number, patch: Partial<Draft['filters'][number]>): void => set({ filters: draft.filters.map((f, j) => j === i ? { ...f, ...patch } : f) })
  return (
    <fieldset class='filters-list'>
      <legend>Filters (every one must match)</legend>
      {draft.filters.map((filter, i) => (
        <div class='grid' key={i}>
          <Field label={`Filter ${i + 1} by`}>
            <select value={filter.by} onChange={e => change(i, { by: e.currentTarget.value as Dimension })}>
              {DIMENSIONS.map(([value, label]) => <option key={value} value={value}>{label}</option>)}
            </select>
          </Field>
          {filter.by === 'field' && <Field label={`Filter ${i + 1} field`}><input required value={filter.field} onInput={e => change(i, { field: e.currentTarget.value })} /></Field>}
          <Field label={`Filter ${i + 1} values`} hint='Comma-separated: any of them'><input required value={filter.values} onInput={e => change(i, { values: e.currentTarget.value })} /></Field>
          <div class='field'><button type='button' class='secondary' onClick={() => set({ filters: draft.filters.filter((_, j) => j !== i) })} aria-label={`Remove filter ${i + 1}`}>Remove</button></div>
        </div>
      ))}
      {draft.filters.length < 10 && <button type='button' class='secondary' onClick={() => set({ filters: [...draft.filters, { by: 'kind', field: '', values: '' }] })}>Add a filter</button>}
    </fieldset>
  )
}

function ResultView ({ result, metric }: { result: Result, metric: MetricType }): JSX.Element {
  const { times, series } = useMemo(() => {
    const times = [...new Set(result.rows.map(r => Date.parse(r.bucket)))]
    const byGroup = new Map<string, (number | null)[]>()
    for (const row of result.rows) {
      const label = groupLabel(row.group)
      let values = byGroup.get(label)
      if (values === undefined) byGroup.set(label, values = [])
      values.push(row.value)
    }
    const series: Series[] = [...byGroup].map(([label, values]) => ({ label, values }))
    return { times, series }
  }, [result])
  const label = METRICS.find(([t]) => t === metric)?.[1] ?? metric
  return (
    <>
      <p class='note' role='status'>{result.eventsRead.toLocaleString('en-US')} events read, {result.from.slice(0, 16).replace('T', ' ')} to {result.to.slice(0, 16).replace('T', ' ')} UTC.{result.groupsOmitted > 0 ? ` ${result.groupsOmitted} smaller groups not shown.` : ''}{result.groupsOverlap ? ' An event counts in each segment its visitor was in: the groups add up to more than all events.' : ''}</p>
      <div class='charts'>
        <Chart title={label} times={times} series={series} total={metric === 'events' || metric === 'sum' ? 'total' : 'summed over buckets'} />
      </div>
      <h2>Totals over the range</h2>
      <Table
        caption='Totals over the range' rows={result.totals} empty='Nothing counted in this range.'
        columns={[
          { head: 'Group', cell: t => groupLabel(t.group) },
          { head: label, num: true, cell: t => format(metric, t.value) },
          ...(metric === 'conversion' ? [{ head: 'Started', num: true, cell: (t: Result['totals'][number]) => (t.started ?? 0).toLocaleString('en-US') }, { head: 'Converted', num: true, cell: (t: Result['totals'][number]) => (t.converted ?? 0).toLocaleString('en-US') }] : []),
        ]}
      />
    </>
  )
}
