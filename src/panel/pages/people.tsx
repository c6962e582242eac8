import { Fragment, type JSX } from 'preact'
import { useState } from 'preact/hooks'
import { accountPath, call, can, enc } from '../api'
import { ErrorNote, Field, Loading, Outcome, Page, Table, formatTime, useAction, useLoad } from '../ui'

type Kind = 'visitor' | 'profile'
interface Entity {
  attributes: Record<string, unknown>
  segments: string[]
  computedSegments: string[]
  profileId?: string | null
  visitors?: string[]
  firstSeen?: string | null
  lastSeen?: string | null
  counts?: Record<string, number>
  lastPlatform?: string | null
  lastDevice?: string | null
  lastPath?: string | null
  viewedSkus?: string[]
  viewedCategories?: string[]
  purchasedSkus?: string[]
  purchases?: number
  totalSpent?: number
}

export function People (): JSX.Element {
  const [kind, setKind] = useState<Kind>('visitor')
  const [id, setId] = useState('')
  const [shown, setShown] = useState<{ kind: Kind, id: string } | null>(null)
  const look = (event: Event): void => { event.preventDefault(); setShown({ kind, id: id.trim() }) }
  return (
    <Page title='People'>
      <form class='filters' onSubmit={look} role='search'>
        <Field label='Look up'>
          <select value={kind} onChange={e => setKind(e.currentTarget.value as Kind)}><option value='visitor'>a visitor (device)</option><option value='profile'>a profile (person)</option></select>
        </Field>
        <Field label={kind === 'visitor' ? 'Visitor id' : 'Profile id'}><input required value={id} onInput={e => setId(e.currentTarget.value)} /></Field>
        <button type='submit'>Look up</button>
      </form>
      {shown !== null && <Person key={`${shown.kind}:${shown.id}`} kind={shown.kind} id={shown.id} open={(k, i) => { setKind(k); setId(i); setShown({ kind: k, id: i }) }} />}
    </Page>
  )
}

function Person ({ kind, id, open }: { kind: Kind, id: string, open: (kind: Kind, id: string) => void }): JSX.Element {
  const path = accountPath(`/${kind === 'visitor' ? 'visitors' : 'profiles'}/${enc(id)}`)
  const load = useLoad(() => call<Entity>('GET', path), [path])
  if (load.data === undefined) return load.error != null ? <ErrorNote error={load.error} /> : <Loading what={`the ${kind}`} />
  const e = load.data
  const attributes = Object.entries(e.attributes).map(([name, value]) => ({ name, value }))
  const behaviour: [string, unknown][] = kind === 'visitor' ? [
    ['First seen', formatTime(e.firstSeen)], ['Last seen', formatTime(e.lastSeen)],
    ['Events', Object.entries(e.counts ?? {}).map(([k, n]) => `${k}: ${n}`).join(', ') || '—'],
    ['Last platform, device, path', [e.lastPlatform, e.lastDevice, e.lastPath].map(v => v ?? '—').join(', ')],
    ['Viewed SKUs', (e.viewedSkus ?? []).join(', ') || '—'], ['Viewed categories', (e.viewedCategories ?? []).join(', ') || '—'],
    ['Purchases', `${e.purchases ?? 0} (total ${e.totalSpent ?? 0})`], ['Purchased SKUs', (e.purchasedSkus ?? []).join(', ') || '—'],
  ] : []
  const linked = kind === 'visitor' ? (e.profileId != null ? [e.profileId] : []) : e.visitors ?? []
  return (
    <article class='card' aria-label={`${kind} ${id}`}>
      <h2>{kind === 'visitor' ? 'Visitor' : 'Profile'} <code>{id}</code></h2>
      <h3>Attributes</h3>
      <Table
        caption='Attributes' rows={attributes} empty='No attributes.'
        columns={[{ head: 'Attribute', cell: a => a.name }, { head: 'Value', cell: a => <code>{JSON.stringify(a.value)}</code> }]}
      />
      <h3>Segments</h3>
      <p>Assigned: {e.segments.join(', ') || 'none'}. Computed: {e.computedSegments.join(', ') || 'none'}.</p>
      {behaviour.length > 0 && <><h3>Behaviour</h3><dl class='facts'>{behaviour.map(([k, v]) => <Fragment key={k}><dt>{k}</dt><dd>{String(v)}</dd></Fragment>)}</dl></>}
      <h3>{kind === 'visitor' ? 'Linked profile' : 'Linked devices'}</h3>
      {linked.length === 0 ? <p>None.</p> : <ul>{linked.map(other => (
        <li key={other}><button type='button' class='link' onClick={() => open(kind === 'visitor' ? 'profile' : 'visitor', other)}>{other}</button></li>
      ))}
      </ul>}
      {kind === 'profile' && can('owner') && <Privacy id={id} />}
    </article>
  )
}

function Privacy ({ id }: { id: string }): JSX.Element {
  const [typed, setTyped] = useState('')
  const erase = useAction(async () => {
    const answer = await call<{ erased: { profiles: number, visitors: number } }>('DELETE', accountPath(`/profiles/${enc(id)}`))
    return `Erased the profile and ${answer.erased.visitors} linked device(s).`
  })
  return (
    <section aria-labelledby='privacy-title'>
      <h3 id='privacy-title'>Export and erase</h3>
      <p><a class='button secondary' href={accountPath(`/profiles/${enc(id)}/export`)} download={`profile-${id}.json`}>Download export (JSON)</a></p>
      <form onSubmit={erase.run} class='danger-zone'>
        <Field label={`Type ${id} to confirm erasure`} hint='Erases the profile and every linked device. This cannot be undone.'>
          <input value={typed} onInput={e => setTyped(e.currentTarget.value)} autoComplete='off' />
        </Field>
        <button type='submit' class='danger' disabled={typed !== id || erase.busy}>Erase this person</button>
        <Outcome action={erase} />
      </form>
    </section>
  )
}
