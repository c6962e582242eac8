// Native destinations: the list with each one's health, a form per type (made from the type's settings
// and credentials schemas, GET …/destinations-types), a test event showing the provider's answer, and
// the recent exchanges (request and answer, masked). docs/destinations.md.

import type { JSX } from 'preact'
import { useState } from 'preact/hooks'
import { accountPath, call, can, enc } from '../api'
import { navigate } from '../router'
import { ErrorNote, Field, Link, Loaded, Loading, Outcome, Page, Table, formatTime, fromList, toList, useAction, useLoad } from '../ui'

interface SchemaProperty { type?: string, description?: string, pattern?: string, anyOf?: Array<{ const?: string }> }
interface DestinationType {
  type: string, label: string, purpose: string, takes: { events: boolean, audiences: boolean }, batchMax: number,
  settings: { properties: Record<string, SchemaProperty>, required?: string[] }, credentials: { properties: Record<string, SchemaProperty>, required?: string[] }
}
interface Health { state: 'idle' | 'ok' | 'failing', sent: number, delivered: number, failed: number, skippedNoIdentifier: number, skippedNoConsent: number, lastError: string | null, lastAt: string | null }
interface Destination {
  id: string, type: string, name: string, enabled: boolean, events: string[], audiences: string[], purpose: string,
  settings: Record<string, unknown>, credentialsSet: string[], health?: Health
}
interface Exchange { at: string, items: number, outcome: string, status: number | null, request: string, answer: string, error: string | null, test: boolean }

export function Destinations (): JSX.Element {
  const load = useLoad(() => call<{ destinations: Destination[] }>('GET', accountPath('/destinations')), [])
  return (
    <Page title='Destinations' actions={can('editor') && <Link class='button' to='destinations/new'>New destination</Link>}>
      <Loaded load={load} what='destinations'>{({ destinations }) => (
        <Table
          caption='Destinations' rows={destinations} empty='No destinations yet.'
          columns={[
            { head: 'Name', cell: d => <Link to={`destinations/${enc(d.id)}`}>{d.name}</Link> },
            { head: 'Type', cell: d => d.type },
            { head: 'Enabled', cell: d => d.enabled ? 'yes' : 'no' },
            { head: 'Health', cell: d => <span class={`badge health-${d.health?.state ?? 'idle'}`}>{d.health?.state ?? 'idle'}</span> },
            { head: 'Sent / failed', cell: d => `${d.health?.delivered ?? 0} / ${d.health?.failed ?? 0}` },
            { head: 'Last error', cell: d => d.health?.lastError ?? '—' },
          ]}
        />
      )}
      </Loaded>
    </Page>
  )
}

export function DestinationEditor ({ id }: { id: string }): JSX.Element {
  const isNew = id === 'new'
  const types = useLoad(() => call<{ types: DestinationType[] }>('GET', accountPath('/destinations-types')), [])
  const load = useLoad(() => isNew ? Promise.resolve(null) : call<Destination>('GET', accountPath(`/destinations/${enc(id)}`)), [id])
  if (types.data === undefined || load.data === undefined) return <Page title='Destination'>{types.error != null || load.error != null ? <ErrorNote error={types.error ?? load.error} /> : <Loading what='the destination' />}</Page>
  return (
    <Page title={load.data === null ? 'New destination' : load.data.name}>
      <DestinationForm key={id} initial={load.data} types={types.data.types} />
      {load.data !== null && <TestAndLog id={id} />}
    </Page>
  )
}

function DestinationForm ({ initial, types }: { initial: Destination | null, types: DestinationType[] }): JSX.Element {
  const [d, setD] = useState<Omit<Destination, 'id' | 'credentialsSet' | 'health'>>(initial ?? { type: types[0]?.type ?? '', name: '', enabled: true, events: [], audiences: [], purpose: types[0]?.purpose ?? 'ads', settings: {} })
  const [newId, setNewId] = useState('')
  const [credentials, setCredentials] = useState<Record<string, string>>({})
  const type = types.find(t => t.type === d.type)
  const editable = can('editor')
  const setting = (name: string, value: unknown): void => setD(x => {
    const settings = { ...x.settings }
    if (value === '' || value === undefined) delete settings[name]
    else settings[name] = value
    return { ...x, settings }
  })
  const save = useAction(async () => {
    const sent = Object.fromEntries(Object.entries(credentials).filter(([, v]) => v !== ''))
    const body = { ...d, ...(Object.keys(sent).length > 0 ? { credentials: sent } : {}) }
    if (initial === null) {
      const created = await call<Destination>('POST', accountPath('/destinations'), newId === '' ? body : { id: newId, ...body })
      navigate(`destinations/${enc(created.id)}`)
      return 'Created.'
    }
    await call('PUT', accountPath(`/destinations/${enc(initial.id)}`), body)
    setCredentials({})
    return 'Saved.'
  })
  const remove = useAction(async () => {
    await call('DELETE', accountPath(`/destinations/${enc(initial!.id)}`))
    navigate('destinations')
  })
  return (
    <form class='form' onSubmit={save.run}>
      {initial === null && (
        <>
          <Field label='Type'>
            <select value={d.type} disabled={!editable} onChange={e => { const t = types.find(x => x.type === e.currentTarget.value); setD(x => ({ ...x, type: e.currentTarget.value, purpose: t?.purpose ?? x.purpose, settings: {} })) }}>
              {types.map(t => <option key={t.type} value={t.type}>{t.label} ({t.type})</option>)}
            </select>
          </Field>
          <Field label='Id' hint='Optional; made up when empty.'><input value={newId} disabled={!editable} onInput={e => setNewId(e.currentTarget.value)} /></Field>
        </>
      )}
      <Field label='Name'><input required value={d.name} disabled={!editable} onInput={e => { const name = e.currentTarget.value; setD(x => ({ ...x, name })) }} /></Field>
      <Field label='Enabled'><input type='checkbox' checked={d.enabled} disabled={!editable} onChange={e => { const enabled = e.currentTarget.checked; setD(x => ({ ...x, enabled })) }} /></Field>
      {type?.takes.events === true && <Field label='Events' hint='Event kinds, comma-separated.'><input value={fromList(d.events)} disabled={!editable} onChange={e => { const events = toList(e.currentTarget.value); setD(x => ({ ...x, events })) }} /></Field>}
      {type?.takes.audiences === true && <Field label='Audiences' hint='Computed segments, comma-separated: entering adds, leaving removes.'><input value={fromList(d.audiences)} disabled={!editable} onChange={e => { const audiences = toList(e.currentTarget.value); setD(x => ({ ...x, audiences })) }} /></Field>}
      <Field label='Purpose'>
        <select value={d.purpose} disabled={!editable} onChange={e => { const purpose = e.currentTarget.value; setD(x => ({ ...x, purpose })) }}><option value='ads'>ads</option><option value='analytics'>analytics</option></select>
      </Field>
      <fieldset><legend>Settings</legend>
        {Object.entries(type?.settings.properties ?? {}).map(([name, schema]) => (
          <Field key={name} label={name + ((type?.settings.required ?? []).includes(name) ? ' (required)' : '')} hint={schema.description}>
            {schema.type === 'boolean'
              ? <input type='checkbox' checked={d.settings[name] === true} disabled={!editable} onChange={e => setting(name, e.currentTarget.checked ? true : undefined)} />
              : schema.type === 'object'
                ? <input value={d.settings[name] === undefined ? '' : JSON.stringify(d.settings[name])} disabled={!editable} placeholder='{"segment": "id"}' onChange={e => { try { setting(name, e.currentTarget.value === '' ? undefined : JSON.parse(e.currentTarget.value)) } catch { setting(name, e.currentTarget.value) } }} />
                : <input value={d.settings[name] === undefined ? '' : String(d.settings[name])} disabled={!editable} onInput={e => setting(name, schema.type === 'integer' && e.currentTarget.value !== '' ? Number(e.currentTarget.value) : e.currentTarget.value)} />}
          </Field>
        ))}
      </fieldset>
      <fieldset><legend>Credentials (never shown again)</legend>
        {Object.keys(type?.credentials.properties ?? {}).map(name => (
          <Field key={name} label={name} hint={initial?.credentialsSet.includes(name) === true ? 'Saved; leave empty to keep it (a new API base URL needs it again).' : 'Not set.'}>
            <input type='password' autoComplete='off' value={credentials[name] ?? ''} disabled={!editable} onInput={e => { const value = e.currentTarget.value; setCredentials(c => ({ ...c, [name]: value })) }} />
          </Field>
        ))}
      </fieldset>
      {editable && (
        <div class='actions'>
          <button type='submit' disabled={save.busy}>Save</button>
          {initial !== null && <button type='button' class='secondary danger' onClick={() => remove.run()}>Delete</button>}
        </div>
      )}
      <Outcome action={save} />
      <Outcome action={remove} />
    </form>
  )
}

function TestAndLog ({ id }: { id: string }): JSX.Element {
  const [answer, setAnswer] = useState<{ outcome: string, status: number | null, error: string | null, exchange: Exchange | null } | null>(null)
  const [version, setVersion] = useState(0)
  const exchanges = useLoad(() => call<{ exchanges: Exchange[] }>('GET', accountPath(`/destinations/${enc(id)}/exchanges`)), [id, version])
  const test = useAction(async () => {
    setAnswer(await call('POST', accountPath(`/destinations/${enc(id)}/test`), {}))
    setVersion(v => v + 1)
  })
  return (
    <section aria-label='Test event and delivery log'>
      <h2>Test event</h2>
      {can('editor') && <button type='button' onClick={() => test.run()} disabled={test.busy}>Send a test event</button>}
      <Outcome action={test} />
      {answer !== null && (
        <div class='test-answer' role='status'>
          <p>Outcome: <strong>{answer.outcome}</strong>{answer.status !== null && ` (HTTP ${answer.status})`}{answer.error !== null && ` — ${answer.error}`}</p>
          {answer.exchange !== null && <pre>{answer.exchange.answer}</pre>}
        </div>
      )}
      <h2>Delivery log</h2>
      <Loaded load={exchanges} what='the delivery log'>{({ exchanges: list }) => (
        <Table
          caption='Recent requests to the provider' rows={list} empty='Nothing sent since this node started.'
          columns={[
            { head: 'At', cell: x => formatTime(x.at) },
            { head: 'Items', cell: x => String(x.items) },
            { head: 'Outcome', cell: x => `${x.outcome}${x.status === null ? '' : ` (${x.status})`}${x.test ? ' · test' : ''}` },
            { head: 'Request', cell: x => <details><summary>request</summary><pre>{x.request}</pre></details> },
            { head: 'Answer', cell: x => <details><summary>{x.error ?? 'answer'}</summary><pre>{x.answer}</pre></details> },
          ]}
        />
      )}
      </Loaded>
    </section>
  )
}
