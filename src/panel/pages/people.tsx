import { Fragment, type JSX } from 'preact'
import { useState } from 'preact/hooks'
import { accountPath, call, can, enc } from '../api'
import { ErrorNote, Field, Loaded, Loading, Outcome, Page, Table, formatTime, useAction, useLoad, type Action } from '../ui'
import { PeopleTable, scanNote, type PersonRow, type ScanState } from '../people-list'

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
  const open = (k: Kind, i: string): void => { setKind(k); setId(i); setShown({ kind: k, id: i }) }
  return (
    <Page title='People'>
      <form class='filters' onSubmit={look} role='search' aria-label='Look a person up'>
        <Field label='Look up'>
          <select value={kind} onChange={e => setKind(e.currentTarget.value as Kind)}><option value='visitor'>a visitor (device)</option><option value='profile'>a profile (person)</option></select>
        </Field>
        <Field label={kind === 'visitor' ? 'Visitor id' : 'Profile id'}><input required value={id} onInput={e => setId(e.currentTarget.value)} /></Field>
        <button type='submit'>Look up</button>
      </form>
      {shown !== null && <Person key={`${shown.kind}:${shown.id}`} kind={shown.kind} id={shown.id} open={open} />}
      <Search open={open} />
      <Recent open={open} />
    </Page>
  )
}

interface PeoplePage extends ScanState { people: PersonRow[] }

/** Pages of a listing gathered: the people so far and how far it went; `more` continues from `next`. */
function useListing (path: (cursor: string | null) => string | null): { rows: PersonRow[], state: ScanState | null, action: Action<boolean> } {
  const [rows, setRows] = useState<PersonRow[]>([])
  const [state, setState] = useState<ScanState | null>(null)
  const action = useAction(async (more: boolean) => {
    const url = path(more ? state?.next ?? null : null)
    if (url === null) return
    const page = await call<PeoplePage>('GET', url)
    setRows(more ? [...rows, ...page.people] : page.people)
    setState({ scanned: page.scanned + (more ? state?.scanned ?? 0 : 0), complete: page.complete, next: page.next })
  })
  return { rows, state, action }
}

function Search ({ open }: { open: (kind: Kind, id: string) => void }): JSX.Element {
  const [kind, setKind] = useState<Kind>('visitor')
  const [prefix, setPrefix] = useState('')
  const [attribute, setAttribute] = useState('')
  const [value, setValue] = useState('')
  const { rows, state, action } = useListing(cursor => {
    const query = new URLSearchParams({ kind, limit: '50' })
    if (prefix.trim() !== '') query.set('id', prefix.trim())
    if (attribute.trim() !== '') query.set('attribute', attribute.trim())
    if (attribute.trim() !== '' && value !== '') query.set('value', value)
    if (cursor !== null) query.set('cursor', cursor)
    return accountPath(`/people?${query.toString()}`)
  })
  const submit = (event: Event): void => { event.preventDefault(); action.run(false) }
  return (
    <section aria-labelledby='search-title'>
      <h2 id='search-title'>Find people</h2>
      <form class='filters' onSubmit={submit} role='search' aria-label='Find people'>
        <Field label='Among'>
          <select value={kind} onChange={e => setKind(e.currentTarget.value as Kind)}><option value='visitor'>visitors (devices)</option><option value='profile'>profiles (people)</option></select>
        </Field>
        <Field label='Id starts with'><input value={prefix} onInput={e => setPrefix(e.currentTarget.value)} /></Field>
        <Field label='Attribute' hint='e.g. email'><input value={attribute} pattern='[A-Za-z0-9_.:\-]{1,128}' onInput={e => setAttribute(e.currentTarget.value)} /></Field>
        <Field label='Value' hint='Exact, any case; empty: any value'><input value={value} disabled={attribute.trim() === ''} onInput={e => setValue(e.currentTarget.value)} /></Field>
        <button type='submit' disabled={action.busy}>Search</button>
      </form>
      <Outcome action={action} />
      {state !== null && <>
        <PeopleTable caption='People found' rows={rows} empty='Nobody matches among the records examined.' open={p => open(p.kind, p.id)} />
        <p class='note' role='status'>{rows.length.toLocaleString('en-US')} found. {scanNote(state.scanned, state.complete)}</p>
        {!state.complete && <button type='button' class='secondary' disabled={action.busy} onClick={() => action.run(true)}>Search further</button>}
      </>}
    </section>
  )
}

function Recent ({ open }: { open: (kind: Kind, id: string) => void }): JSX.Element {
  const load = useLoad(() => call<PeoplePage>('GET', accountPath('/people/recent?limit=20')), [])
  return (
    <section aria-labelledby='recent-title'>
      <h2 id='recent-title'>Recently active visitors</h2>
      <Loaded load={load} what='recent visitors'>{page => <>
        <PeopleTable caption='Recently active visitors' rows={page.people} empty='No visitor yet.' open={p => open('visitor', p.id)} />
        <p class='note'>Latest activity first (an event, or a change of attributes or segments). {scanNote(page.scanned, page.complete)}</p>
      </>}
      </Loaded>
    </section>
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
