import type { JSX } from 'preact'
import { useMemo, useState } from 'preact/hooks'
import { Chart } from '../chart'
import { lagNote, loadReport, reportQuery, seriesOf, timesOf, totalsOf } from '../report-data'
import type { Granularity, Report } from '../../reports/report-shape'
import { Field, Loaded, Page, Table, formatTime, useLoad } from '../ui'

const DAY_MS = 86_400_000
const dateInput = (d: Date): string => d.toISOString().slice(0, 10)
const rate = (part: number, whole: number): string => whole === 0 ? '—' : `${(100 * part / whole).toFixed(1)} %`

export function Reports (): JSX.Element {
  const today = new Date()
  const [from, setFrom] = useState(dateInput(new Date(today.getTime() - 6 * DAY_MS)))
  const [to, setTo] = useState(dateInput(today))
  const [granularity, setGranularity] = useState<Granularity>('day')
  const range = useMemo(() => ({ from: new Date(`${from}T00:00:00Z`), to: new Date(Date.parse(`${to}T00:00:00Z`) + DAY_MS) }), [from, to])
  const load = useLoad(() => loadReport(range.from, range.to, granularity), [range, granularity])
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
      <Loaded load={load} what='the report'>{report => <ReportView report={report} />}</Loaded>
    </Page>
  )
}

function ReportView ({ report }: { report: Report }): JSX.Element {
  const { rows } = report
  const times = timesOf(rows)
  const campaigns = [...totalsOf(rows, row => row.campaigns)].map(([id, t]) => ({ id, impressions: t.impressions ?? 0, views: t.views ?? 0, clicks: t.clicks ?? 0 }))
  const segments = [...totalsOf(rows, row => row.segments)].map(([name, t]) => ({ name, enter: t.enter ?? 0, exit: t.exit ?? 0 }))
  const latency = rows.filter(row => row.deliveries.p50Ms !== null)
  return (
    <>
      <p class='note' role='status'>{lagNote(report.lagMs)}</p>
      <div class='charts'>
        <Chart title='Events per kind' times={times} series={seriesOf(rows, row => row.events)} />
        <Chart title='Unique visitors (estimate)' times={times} series={[{ label: 'visitors', values: rows.map(row => row.visitors) }]} />
        <Chart title='Campaign impressions' times={times} series={seriesOf(rows, row => Object.fromEntries(Object.entries(row.campaigns).map(([id, c]) => [id, c.impressions])))} />
        <Chart title='Webhook deliveries' times={times} series={['delivered', 'failed', 'dead'].map(k => ({ label: k, values: rows.map(row => row.deliveries[k as 'delivered']) }))} />
      </div>
      <h2>Campaigns</h2>
      <Table
        caption='Campaign totals' rows={campaigns} empty='No impressions in this range.'
        columns={[{ head: 'Campaign', cell: c => c.id }, { head: 'Impressions', cell: c => c.impressions }, { head: 'Views', cell: c => c.views },
          { head: 'Clicks', cell: c => c.clicks }, { head: 'View rate', cell: c => rate(c.views, c.impressions) }, { head: 'Click rate', cell: c => rate(c.clicks, c.views) }]}
      />
      <h2>Segments</h2>
      <Table
        caption='Segment changes' rows={segments} empty='No segment changes in this range.'
        columns={[{ head: 'Segment', cell: s => s.name }, { head: 'Entered', cell: s => s.enter }, { head: 'Exited', cell: s => s.exit }]}
      />
      <h2>Delivery latency</h2>
      <Table
        caption='Delivery latency' rows={latency} empty='No deliveries in this range.'
        columns={[{ head: 'From', cell: r => formatTime(r.t) }, { head: 'p50 ms', cell: r => r.deliveries.p50Ms }, { head: 'p95 ms', cell: r => r.deliveries.p95Ms }, { head: 'p99 ms', cell: r => r.deliveries.p99Ms }]}
      />
    </>
  )
}
