import type { JSX } from 'preact'
import { accountPath, call, can } from '../api'
import { Link, Loaded, Page, Table, formatTime, useLoad } from '../ui'
import type { Campaign } from './campaign-editor'

export function Campaigns (): JSX.Element {
  const load = useLoad(() => call<{ campaigns: (Campaign & { id: string })[] }>('GET', accountPath('/campaigns')), [])
  return (
    <Page title='Campaigns' actions={can('editor') && <Link class='button' to='campaigns/new'>New campaign</Link>}>
      <Loaded load={load} what='campaigns'>{({ campaigns }) => (
        <Table
          caption='Campaigns' rows={campaigns} empty='No campaigns yet.'
          columns={[
            { head: 'Name', cell: c => <Link to={`campaigns/${encodeURIComponent(c.id)}`}>{c.name}</Link> },
            { head: 'Status', cell: c => <span class={`badge ${c.status}`}>{c.status}</span> },
            { head: 'Priority', cell: c => c.priority },
            { head: 'Schedule', cell: c => c.startsAt === undefined && c.endsAt === undefined ? 'always' : `${formatTime(c.startsAt)} → ${formatTime(c.endsAt)}` },
            { head: 'Events', cell: c => c.trigger.events?.join(', ') ?? 'all' },
            { head: 'Cap', cell: c => c.frequencyCap === undefined ? '—' : `${c.frequencyCap.max} per ${c.frequencyCap.per}` },
          ]}
        />
      )}
      </Loaded>
    </Page>
  )
}
