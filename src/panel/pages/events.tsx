import type { JSX } from 'preact'
import { useState } from 'preact/hooks'
import { accountPath, call, can, enc } from '../api'
import { Field, Loaded, Outcome, Page, Table, fromList, toList, useAction, useLoad } from '../ui'

interface EventType { name: string, required: string[] }

const BUILT_IN = new Set(['pageView', 'productView', 'purchase', 'campaignView', 'campaignClick', 'consent'])

export function Events (): JSX.Element {
  const load = useLoad(() => call<{ eventTypes: EventType[] }>('GET', accountPath('/event-types')), [])
  const [name, setName] = useState('')
  const [required, setRequired] = useState('')
  const editable = can('editor')
  const save = useAction(async () => {
    await call('PUT', accountPath(`/event-types/${enc(name)}`), { required: toList(required) })
    load.reload()
    const saved = name
    setName('')
    setRequired('')
    return `Saved ${saved}.`
  })
  const remove = useAction(async (type: string) => {
    if (!confirm(`Delete the event type ${type}? Events of this type are refused from then on.`)) return
    await call('DELETE', accountPath(`/event-types/${enc(type)}`))
    load.reload()
    return `Deleted ${type}.`
  })
  return (
    <Page title='Events'>
      <p class='note'>Every event sent to <code>/campaigns/query</code> names a kind: a built-in one, or a custom type defined here with the fields it must carry.</p>
      {editable && (
        <form class='card' onSubmit={save.run} aria-labelledby='new-event'>
          <h2 id='new-event'>Define an event type</h2>
          <div class='grid'>
            <Field label='Event type name' hint='Letters, digits, _ . : -'><input required pattern='[A-Za-z0-9_.:\-]{1,128}' value={name} onInput={e => setName(e.currentTarget.value)} /></Field>
            <Field label='Required fields' hint='Comma-separated; may be empty.'><input value={required} onInput={e => setRequired(e.currentTarget.value)} /></Field>
          </div>
          <button type='submit' disabled={save.busy}>Save event type</button>
          <Outcome action={save} />
        </form>
      )}
      <Outcome action={remove} />
      <Loaded load={load} what='event types'>{({ eventTypes }) => (
        <Table
          caption='Event types' rows={eventTypes} empty='No event types.'
          columns={[
            { head: 'Event', cell: t => <code>{t.name}</code> },
            { head: 'Kind', cell: t => BUILT_IN.has(t.name) ? 'built in' : 'custom' },
            { head: 'Required fields', cell: t => fromList(t.required) || '—' },
            { head: 'Actions', cell: t => editable && !BUILT_IN.has(t.name) && <button type='button' class='danger' onClick={() => remove.run(t.name)} aria-label={`Delete ${t.name}`}>Delete</button> },
          ]}
        />
      )}
      </Loaded>
    </Page>
  )
}
