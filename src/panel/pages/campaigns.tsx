import type { JSX } from 'preact'
import { useMemo } from 'preact/hooks'
import { accountPath, call, can, enc } from '../api'
import { loadReport, totalsOf } from '../report-data'
import { Link, Loaded, Page, Table, formatTime, useLoad } from '../ui'
import type { Campaign } from './campaign'

const DAY_MS = 86_400_000
/** The campaigns list counts the last 30 days (the Reports page picks any range). */
const STATS_DAYS = 30

interface Stats { impressions: number, views: number, clicks: number, conversions: number | null }
type Listed = Campaign & { id: string }

export const percent = (part: number, whole: number): string => whole === 0 ? '—' : `${(100 * part / whole).toFixed(1)} %`

/**
 * Per campaign: impressions, views and clicks from the reports, and for an experiment with a conversion
 * goal the conversions its results count (other campaigns have no goal to convert on: null).
 */
async function loadStats (campaigns: Listed[], from: Date, to: Date): Promise<Map<string, Stats>> {
  const report = await loadReport(from, to, 'day')
  const totals = totalsOf(report.rows, row => row.campaigns)
  const conversions = await Promise.all(campaigns.map(async c => {
    if (c.goals?.[0]?.metric !== 'conversion') return null
    try {
      const results = await call<{ variants: { goals: { total: number }[] }[] }>('GET', accountPath(`/campaigns/${enc(c.id)}/results`))
      return results.variants.reduce((sum, v) => sum + (v.goals[0]?.total ?? 0), 0)
    } catch {
      return null
    }
  }))
  return new Map(campaigns.map((c, i) => {
    const t = totals.get(c.id) ?? {}
    return [c.id, { impressions: t.impressions ?? 0, views: t.views ?? 0, clicks: t.clicks ?? 0, conversions: conversions[i] ?? null }]
  }))
}

export function Campaigns (): JSX.Element {
  const range = useMemo(() => {
    const to = new Date(Math.ceil(Date.now() / DAY_MS) * DAY_MS)
    return { from: new Date(to.getTime() - STATS_DAYS * DAY_MS), to }
  }, [])
  const load = useLoad(async () => {
    const { campaigns } = await call<{ campaigns: Listed[] }>('GET', accountPath('/campaigns'))
    // The list shows without the numbers when the report cannot be read.
    const stats = await loadStats(campaigns, range.from, range.to).catch(() => new Map<string, Stats>())
    return { campaigns, stats }
  }, [range])
  const number = (c: Listed, pick: (s: Stats) => number | null): string => {
    const value = load.data?.stats.get(c.id)
    const n = value === undefined ? null : pick(value)
    return n === null ? '—' : n.toLocaleString('en-US')
  }
  return (
    <Page title='Campaigns' actions={can('editor') && <Link class='button' to='campaigns/new'>New campaign</Link>}>
      <p class='note'>Numbers of the last {STATS_DAYS} days. CTR: clicks per view. Conversions: the primary goal of an experiment.</p>
      <Loaded load={load} what='campaigns'>{({ campaigns, stats }) => (
        <Table
          caption='Campaigns' rows={campaigns} empty='No campaigns yet.'
          columns={[
            { head: 'Name', cell: c => <Link to={`campaigns/${encodeURIComponent(c.id)}`}>{c.name}</Link> },
            { head: 'Status', cell: c => <span class={`badge ${c.status}`}>{c.status}</span> },
            { head: 'Impressions', num: true, cell: c => number(c, s => s.impressions) },
            { head: 'Views', num: true, cell: c => number(c, s => s.views) },
            { head: 'Clicks', num: true, cell: c => number(c, s => s.clicks) },
            { head: 'CTR', num: true, cell: c => { const s = stats.get(c.id); return s === undefined ? '—' : percent(s.clicks, s.views) } },
            { head: 'Conversions', num: true, cell: c => number(c, s => s.conversions) },
            { head: 'Priority', cell: c => c.priority },
            { head: 'Schedule', cell: c => c.startsAt === undefined && c.endsAt === undefined ? 'always' : `${formatTime(c.startsAt)} → ${formatTime(c.endsAt)}` },
            { head: 'Shown on', cell: c => c.trigger.events?.join(', ') ?? 'every event' },
          ]}
        />
      )}
      </Loaded>
    </Page>
  )
}
