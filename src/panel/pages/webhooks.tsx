import type { JSX } from 'preact'
import { accountPath, call, can, enc } from '../api'
import { Link, Loaded, Page, Table, useLoad } from '../ui'
import type { Webhook } from './webhook-editor'

function triggerText (w: Webhook): string {
  const t = w.trigger
  if (t.kind === 'event') return `events: ${(t.events ?? []).join(', ')}`
  if (t.kind === 'audience') return `${(t.on ?? []).join(' / ')} of ${(t.segments ?? []).join(', ')}`
  return `schedule ${t.cron ?? `every ${t.every ?? ''}`}`
}

const DAY_MS = 86_400_000
/** Pages of the deliveries log read per status (500 a page) before the count is given as "at least". */
const PAGES_MAX = 6

interface Listed { status: string, updatedAt: string }
interface Health { delivered: number, failing: number, dead: number, more: boolean }

/** How many of a webhook's deliveries in `status` changed in the last 24 h (the log lists oldest first: read to its end). */
async function countRecent (id: string, status: string, sinceMs: number): Promise<{ n: number, more: boolean }> {
  let n = 0
  let after: string | number | null = null
  for (let page = 0; page < PAGES_MAX; page++) {
    const answer: { deliveries: Listed[], next: string | number | null } = await call('GET', accountPath(`/webhooks/${enc(id)}/deliveries?status=${status}&limit=500${after === null ? '' : `&after=${enc(String(after))}`}`))
    n += answer.deliveries.filter(d => Date.parse(d.updatedAt) >= sinceMs).length
    if (answer.next === null) return { n, more: false }
    after = answer.next
  }
  return { n, more: true }
}

async function healthOf (id: string): Promise<Health> {
  const since = Date.now() - DAY_MS
  // Failing: retrying now (a failed attempt, another one due), whenever it started.
  const [delivered, failing, dead] = await Promise.all([countRecent(id, 'delivered', since), countRecent(id, 'failed', 0), countRecent(id, 'dead', since)])
  return { delivered: delivered.n, failing: failing.n, dead: dead.n, more: delivered.more || failing.more || dead.more }
}

function HealthCell ({ health }: { health: Health | undefined }): JSX.Element {
  if (health === undefined) return <span class='note'>—</span>
  const state = health.dead > 0 ? 'dead' : health.failing > 0 ? 'failed' : health.delivered > 0 ? 'delivered' : 'idle'
  const words = { dead: 'dead deliveries', failed: 'failing', delivered: 'healthy', idle: 'idle' }[state]
  const plus = health.more ? '+' : ''
  return (
    <span class='health'>
      <span class={`badge ${state}`}>{words}</span>
      <span class='health-counts'>{health.delivered}{plus} delivered · <span class={health.failing > 0 ? 'warn' : ''}>{health.failing} failing</span> · <span class={health.dead > 0 ? 'bad' : ''}>{health.dead} dead</span></span>
    </span>
  )
}

export function Webhooks (): JSX.Element {
  const load = useLoad(async () => {
    const { webhooks } = await call<{ webhooks: (Webhook & { id: string })[] }>('GET', accountPath('/webhooks'))
    const health = await Promise.all(webhooks.map(w => healthOf(w.id).catch(() => undefined)))
    return { webhooks, health: new Map(webhooks.map((w, i) => [w.id, health[i]])) }
  }, [])
  return (
    <Page title='Webhooks' actions={can('editor') && <Link class='button' to='webhooks/new'>New webhook</Link>}>
      <p class='note'>Health: deliveries delivered and given up (dead) in the last 24 hours, and those failing now (retrying).</p>
      <Loaded load={load} what='webhooks'>{({ webhooks, health }) => (
        <Table
          caption='Webhooks' rows={webhooks} empty='No webhooks yet.'
          columns={[
            { head: 'Name', cell: w => <Link to={`webhooks/${encodeURIComponent(w.id)}`}>{w.name}</Link> },
            { head: 'Enabled', cell: w => w.enabled ? 'yes' : 'no' },
            { head: 'Health (24 h)', cell: w => <HealthCell health={health.get(w.id)} /> },
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
