import type { JSX } from 'preact'
import { accountPath, call, can } from '../api'
import { Link, Loaded, Page, Table, useLoad } from '../ui'
import type { Webhook } from './webhook-editor'

function triggerText (w: Webhook): string {
  const t = w.trigger
  if (t.kind === 'event') return `events: ${(t.events ?? []).join(', ')}`
  if (t.kind === 'audience') return `${(t.on ?? []).join(' / ')} of ${(t.segments ?? []).join(', ')}`
  return `schedule ${t.cron ?? `every ${t.every ?? ''}`}`
}

export function Webhooks (): JSX.Element {
  const load = useLoad(() => call<{ webhooks: (Webhook & { id: string })[] }>('GET', accountPath('/webhooks')), [])
  return (
    <Page title='Webhooks' actions={can('editor') && <Link class='button' to='webhooks/new'>New webhook</Link>}>
      <Loaded load={load} what='webhooks'>{({ webhooks }) => (
        <Table
          caption='Webhooks' rows={webhooks} empty='No webhooks yet.'
          columns={[
            { head: 'Name', cell: w => <Link to={`webhooks/${encodeURIComponent(w.id)}`}>{w.name}</Link> },
            { head: 'Enabled', cell: w => w.enabled ? 'yes' : 'no' },
            { head: 'Trigger', cell: triggerText },
            { head: 'Target', cell: w => <code class='url'>{w.request.method} {w.request.url}</code> },
            { head: 'Mode', cell: w => w.delivery.mode },
          ]}
        />
      )}
      </Loaded>
    </Page>
  )
}
