import type { JSX } from 'preact'
import { useMemo, useState } from 'preact/hooks'
import { Chart } from '../chart'
import { lagNote, loadReport, reportQuery, seriesOf, timesOf, totalsOf } from '../report-data'
import type { Granularity, Report } from '../../reports/report-shape'
import { Field, Loaded, Page, Table, formatTime, useLoad } from '../ui'
import { accountPath, call } from '../api'

const DAY_MS = 86_400_000
const dateInput = (d: Date): string => d.toISOString().slice(0, 10)
const rate = (part: number, whole: number): string => whole === 0 ? '—' : `${(100 * part / whole).toFixed(1)} %`

export function Reports (): JSX.Element {
  const today = new Date()
  const [from, setFrom] = useState(dateInput(new Date(today.getTime() - 6 * DAY_MS)))
  const [to, setTo] = useState(dateInput(today))
  const [granularity, setGranularity] = useState<Granularity>('day')
  const range = useMemo(() => ({ from: new Date(`${from}T00:00:00Z`), to: new Date(Date.parse(`${to}T00:00:00Z`) + DAY_MS) }), [from, to])
  const load = useLoad(async () => {
    const [report, names] = await Promise.all([
      loadReport(range.from, range.to, granularity),
      // Campaigns by name; a deleted campaign keeps its id.
      call<{ campaigns: { id: string, name: string }[] }>('GET', accountPath('/campaigns')).then(a => new Map(a.campaigns.map(c => [c.id, c.name])), () => new Map<string, string>()),
    ])
    return { report, names }
  }, [range, granularity])
  return (
    <Page title='Reports' actions={<a class='button secondary' href={`${reportQuery(range.from, range.to, granularity)}&format=csv`} download='beacon-report.csv'>Download CSV</a>}>
      <form class='filters' onSubmit={e => { e.preventDefault(); load.reload() }}>
        <Field label='From (UTC)'><input type='date' required value={from} onChange={e => setFrom(e.currentTarget.value)} /></Field>
        <Field label='To (UTC, inclusive)'><input type='date' required value={to} onChange={e => setTo(e.currentTarget.value)} /></Field>
        <Field label='Granularity'>
          <select value={granularity} onChange={e => setGranularity(e.currentTarget.value as Granularity)}>
            <option value='day'>per day</option><option value='hour'>per hour</option>
          </select>
        </Field>
        <button type='submit' class='secondary'>Refresh</button>
      </form>
      <Loaded load={load} what='the report'>{({ report, names }) => <ReportView report={report} names={names} />}</Loaded>
    </Page>
  )
}

const DELIVERY_COLORS = { delivered: '#16a34a', failed: '#d97706', dead: '#dc2626' } as const

function Tile ({ label, value, note, tone }: { label: string, value: string, note?: string, tone?: 'bad' }): JSX.Element {
  return (
    <div class={tone === 'bad' ? 'tile-kpi bad' : 'tile-kpi'}>
      <span class='kpi-label'>{label}</span>
      <strong class='kpi-value'>{value}</strong>
      {note !== undefined && <span class='kpi-note'>{note}</span>}
    </div>
  )
}

const count = (n: number): string => n.toLocaleString('en-US')

function ReportView ({ report, names }: { report: Report, names: Map<string, string> }): JSX.Element {
  const { rows } = report
  const times = timesOf(rows)
  const nameOf = (id: string): string => names.get(id) ?? id
  const campaigns = [...totalsOf(rows, row => row.campaigns)].map(([id, t]) => ({ id, name: nameOf(id), impressions: t.impressions ?? 0, views: t.views ?? 0, clicks: t.clicks ?? 0 }))
  const segments = [...totalsOf(rows, row => row.segments)].map(([name, t]) => ({ name, enter: t.enter ?? 0, exit: t.exit ?? 0 }))
  const latency = rows.filter(row => row.deliveries.p50Ms !== null)
  const sum = (pick: (row: Report['rows'][number]) => number): number => rows.reduce((total, row) => total + pick(row), 0)
  const events = sum(row => Object.values(row.events).reduce((a, b) => a + b, 0))
  const impressions = campaigns.reduce((a, c) => a + c.impressions, 0)
  const views = campaigns.reduce((a, c) => a + c.views, 0)
  const clicks = campaigns.reduce((a, c) => a + c.clicks, 0)
  const dead = sum(row => row.deliveries.dead)
  const failed = sum(row => row.deliveries.failed)
  return (
    <>
      <p class='note' role='status'>{lagNote(report.lagMs)}</p>
      <div class='kpis' role='list' aria-label='Totals of the range'>
        <div role='listitem'><Tile label='Events' value={count(events)} /></div>
        <div role='listitem'><Tile label='Visitors' value={count(sum(row => row.visitors))} note={report.granularity === 'day' ? 'unique per day, summed' : 'unique per hour, summed'} /></div>
        <div role='listitem'><Tile label='Impressions' value={count(impressions)} /></div>
        <div role='listitem'><Tile label='Clicks' value={count(clicks)} note={`CTR ${rate(clicks, views)} of ${count(views)} views`} /></div>
        <div role='listitem'><Tile label='Webhook deliveries' value={count(sum(row => row.deliveries.delivered))} note={`${count(failed)} failed attempts`} /></div>
        <div role='listitem'><Tile label='Dead deliveries' value={count(dead)} note={dead === 0 ? 'none given up' : 'given up: replay them from the webhook'} tone={dead === 0 ? undefined : 'bad'} /></div>
      </div>
      <div class='charts'>
        <Chart title='Events per kind' times={times} series={seriesOf(rows, row => row.events)} />
        <Chart title='Unique visitors (estimate)' times={times} series={[{ label: 'visitors', values: rows.map(row => row.visitors) }]} total='summed' />
        <Chart title='Campaign impressions' times={times} series={seriesOf(rows, row => Object.fromEntries(Object.entries(row.campaigns).map(([id, c]) => [nameOf(id), c.impressions])))} />
        <Chart title='Webhook deliveries' times={times} series={(['delivered', 'failed', 'dead'] as const).map(k => ({ label: k, color: DELIVERY_COLORS[k], values: rows.map(row => row.deliveries[k]) }))} />
      </div>
      <h2>Campaigns</h2>
      <Table
        caption='Campaign totals' rows={campaigns} empty='No impressions in this range.'
        columns={[{ head: 'Campaign', cell: c => c.name }, { head: 'Impressions', num: true, cell: c => count(c.impressions) }, { head: 'Views', num: true, cell: c => count(c.views) },
          { head: 'Clicks', num: true, cell: c => count(c.clicks) }, { head: 'View rate', num: true, cell: c => rate(c.views, c.impressions) }, { head: 'CTR', num: true, cell: c => rate(c.clicks, c.views) }]}
      />
      <h2>Segments</h2>
      <Table
        caption='Segment changes' rows={segments} empty='No segment changes in this range.'
        columns={[{ head: 'Segment', cell: s => s.name }, { head: 'Entered', num: true, cell: s => count(s.enter) }, { head: 'Exited', num: true, cell: s => count(s.exit) }]}
      />
      <h2>Delivery latency</h2>
      <Table
        caption='Delivery latency' rows={latency} empty='No deliveries in this range.'
        columns={[{ head: 'From', cell: r => formatTime(r.t) }, { head: 'p50 ms', num: true, cell: r => r.deliveries.p50Ms }, { head: 'p95 ms', num: true, cell: r => r.deliveries.p95Ms }, { head: 'p99 ms', num: true, cell: r => r.deliveries.p99Ms }]}
      />
    </>
  )
}
