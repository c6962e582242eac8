import type { JSX } from 'preact'
import { useEffect, useState } from 'preact/hooks'
import { accountPath, call, can, enc } from '../api'
import { ConditionBuilder } from '../condition'
import { navigate } from '../router'
import { ruleText } from '../rule-text'
import { ErrorNote, Field, Link, Loading, Outcome, Page, Table, fromList, toList, useAction, useLoad } from '../ui'
import { MediaPicker } from './media'
import { Preview } from './campaign-preview'
import { VariantsEditor } from './experiment'
import type { Campaign } from './campaign'

const EMPTY: Campaign = { name: '', status: 'active', priority: 0, trigger: {}, content: {} }
const TRIGGER_LISTS = [['platforms', 'Platforms', 'web, ios'], ['devices', 'Devices', 'desktop, tablet, mobile'], ['paths', 'Paths', '/shoes/*']] as const

/** An ISO time ⇄ the value of a datetime-local input (the browser's local time). */
function toLocalInput (iso: string | undefined): string {
  if (iso === undefined) return ''
  const d = new Date(iso)
  return new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16)
}
const fromLocalInput = (value: string): string | undefined => value === '' ? undefined : new Date(value).toISOString()

/** The trigger with `key` set to `list` (left out when empty: any). */
function withList (trigger: Campaign['trigger'], key: string, list: string[]): Campaign['trigger'] {
  const next: Record<string, string[]> = { ...trigger }
  if (list.length === 0) delete next[key]
  else next[key] = list
  return next
}

/**
 * The trigger's events, picked among the account's event types (built-in and defined on the Events
 * page); none picked: any event. A saved event that is no longer defined stays listed, checked.
 */
function EventPicker ({ chosen, onChange }: { chosen: string[], onChange: (events: string[]) => void }): JSX.Element {
  const load = useLoad(() => call<{ eventTypes: { name: string }[] }>('GET', accountPath('/event-types')), [])
  const names = [...new Set([...(load.data?.eventTypes ?? []).map(t => t.name), ...chosen])]
  const toggle = (name: string, on: boolean): void => onChange(on ? [...chosen, name] : chosen.filter(n => n !== name))
  return (
    <fieldset class='choices'>
      <legend class='label'>Trigger events</legend>
      <p class='hint'>The campaign is answered for these events; none ticked: every event. New kinds are defined on the <Link to='events'>Events</Link> page.</p>
      {load.data === undefined && load.error == null ? <Loading what='event types' /> : <ErrorNote error={load.error} />}
      <div class='choice-list'>
        {names.map(name => (
          <label key={name} class='choice'><input type='checkbox' checked={chosen.includes(name)} onChange={e => toggle(name, e.currentTarget.checked)} /> {name}</label>
        ))}
      </div>
    </fieldset>
  )
}

export function CampaignEditor ({ id }: { id: string }): JSX.Element {
  const isNew = id === 'new'
  const load = useLoad(() => isNew ? Promise.resolve({ id: '', ...EMPTY }) : call<Campaign & { id: string }>('GET', accountPath(`/campaigns/${enc(id)}`)), [id])
  if (load.data === undefined) return <Page title={isNew ? 'New campaign' : 'Campaign'}>{load.error != null ? <ErrorNote error={load.error} /> : <Loading what='the campaign' />}</Page>
  const { id: _id, ...campaign } = load.data
  return <Editor key={id} id={isNew ? null : id} initial={campaign} />
}

function Editor ({ id, initial }: { id: string | null, initial: Campaign }): JSX.Element {
  const [campaign, setCampaign] = useState<Campaign>(initial)
  const [newId, setNewId] = useState('')
  const [contentText, setContentText] = useState(JSON.stringify(initial.content, null, 2))
  const [contentProblem, setContentProblem] = useState<string | null>(null)
  const editable = can('editor')
  const set = (patch: Partial<Campaign>): void => setCampaign(c => ({ ...c, ...patch }))
  const setTrigger = (key: string, text: string): void => set({ trigger: withList(campaign.trigger, key, toList(text)) })
  const setContent = (text: string): void => {
    setContentText(text)
    try { set({ content: JSON.parse(text) }); setContentProblem(null) } catch (error) { setContentProblem(`Not applied: ${(error as Error).message}`) }
  }
  useEffect(() => { if (id === null) setNewId(campaign.name.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '').slice(0, 64)) }, [campaign.name])

  const save = useAction(async () => {
    const target = id ?? newId
    const body: Record<string, unknown> = { ...campaign }
    for (const key of ['startsAt', 'endsAt', 'rule', 'frequencyCap', 'variants', 'goals', 'trafficPercent', 'allocation']) if (body[key] === undefined) delete body[key]
    // Kept by Beacon; a client's copy is ignored anyway.
    delete body.revision
    delete body.revisionSince
    await call('PUT', accountPath(`/campaigns/${enc(target)}`), body)
    if (id === null) navigate(`campaigns/${enc(target)}`)
    return 'Saved.'
  })
  const remove = useAction(async () => {
    if (id === null || !confirm(`Delete the campaign ${campaign.name}?`)) return
    await call('DELETE', accountPath(`/campaigns/${enc(id)}`))
    navigate('campaigns')
  })

  return (
    <Page title={campaign.name === '' ? 'New campaign' : campaign.name}>
      <form onSubmit={save.run}>
        <fieldset disabled={!editable} class='plain'>
          {!editable && <p class='note'>Your role can read campaigns, not change them.</p>}
          <div class='grid'>
            <Field label='Name'><input required maxLength={200} value={campaign.name} onInput={e => set({ name: e.currentTarget.value })} /></Field>
            {id === null && <Field label='Id' hint='Letters, digits, _ . : -; part of its URL.'><input required pattern='[A-Za-z0-9_.:\-]{1,128}' value={newId} onInput={e => setNewId(e.currentTarget.value)} /></Field>}
            <Field label='Priority' hint='Higher first.'><input type='number' step={1} required value={campaign.priority} onInput={e => set({ priority: Number(e.currentTarget.value) })} /></Field>
            <Field label='Paused'><input type='checkbox' checked={campaign.status === 'paused'} onChange={e => set({ status: e.currentTarget.checked ? 'paused' : 'active' })} /></Field>
            <Field label='Starts at' hint='Your local time; empty: now.'><input type='datetime-local' value={toLocalInput(campaign.startsAt)} onInput={e => set({ startsAt: fromLocalInput(e.currentTarget.value) })} /></Field>
            <Field label='Ends at' hint='Exclusive; empty: never.'><input type='datetime-local' value={toLocalInput(campaign.endsAt)} onInput={e => set({ endsAt: fromLocalInput(e.currentTarget.value) })} /></Field>
          </div>
          <h2>Trigger</h2>
          <EventPicker chosen={campaign.trigger.events ?? []} onChange={events => set({ trigger: withList(campaign.trigger, 'events', events) })} />
          <p class='note'>Platforms, devices and paths: comma-separated; an empty list means any.</p>
          <div class='grid'>
            {TRIGGER_LISTS.map(([key, label, example]) => (
              <Field key={key} label={`Trigger ${label.toLowerCase()}`} hint={`For example ${example}`}>
                <input value={fromList(campaign.trigger[key])} onChange={e => setTrigger(key, e.currentTarget.value)} />
              </Field>
            ))}
          </div>
          <h2>Condition</h2>
          <ConditionBuilder name='Rule' rule={campaign.rule} onChange={rule => set({ rule })} />
          <p class='rule-text' aria-live='polite'>{campaign.rule === undefined ? 'Shown on every event the trigger lets through.' : `Shown when ${ruleText(campaign.rule)}.`}</p>
          <h2>Frequency cap</h2>
          <div class='grid'>
            <Field label='Impressions at most' hint='Empty: no cap.'>
              <input
                type='number' min={1} value={campaign.frequencyCap?.max ?? ''}
                onInput={e => { const max = e.currentTarget.value; set({ frequencyCap: max === '' ? undefined : { max: Number(max), per: campaign.frequencyCap?.per ?? 'day' } }) }}
              />
            </Field>
            <Field label='Per'>
              <select
                value={campaign.frequencyCap?.per ?? 'day'} disabled={campaign.frequencyCap === undefined}
                onChange={e => set({ frequencyCap: { max: campaign.frequencyCap?.max ?? 1, per: e.currentTarget.value } })}
              >
                {['hour', 'day', 'week', 'lifetime'].map(p => <option key={p} value={p}>{p}</option>)}
              </select>
            </Field>
          </div>
          <h2>Content</h2>
          <Field label='Content (JSON)' hint='What /campaigns/query answers for this campaign.' wide>
            <textarea rows={6} spellcheck={false} value={contentText} onInput={e => setContent(e.currentTarget.value)} aria-invalid={contentProblem !== null} />
          </Field>
          {contentProblem !== null && <p class='error' role='alert'>{contentProblem}</p>}
          <Preview campaign={campaign} />
          <MediaPicker onPick={url => {
            const content = typeof campaign.content === 'object' && campaign.content !== null && !Array.isArray(campaign.content) ? campaign.content : {}
            setContent(JSON.stringify({ ...content, image: url }, null, 2))
          }}
          />
          <VariantsEditor
            value={{ variants: campaign.variants, goals: campaign.goals, trafficPercent: campaign.trafficPercent, allocation: campaign.allocation }}
            onChange={fields => set({ variants: fields.variants, goals: fields.goals, trafficPercent: fields.trafficPercent, allocation: fields.allocation })}
          />
          {id !== null && campaign.variants !== undefined && <p><Link to={`campaigns/${enc(id)}/results`}>Experiment results</Link></p>}
          <div class='row'>
            <button type='submit' disabled={save.busy}>Save campaign</button>
            {id !== null && <button type='button' class='danger' onClick={remove.run}>Delete</button>}
          </div>
          <Outcome action={save} /><Outcome action={remove} />
        </fieldset>
      </form>
      {id !== null && editable && <TestEvent id={id} />}
    </Page>
  )
}

interface TestAnswer { matched: boolean, checks: { check: string, ok: boolean, detail: string }[] }

function TestEvent ({ id }: { id: string }): JSX.Element {
  const [event, setEvent] = useState(JSON.stringify({ visitorId: crypto.randomUUID(), platform: 'web', event: 'pageView', path: '/' }, null, 2))
  const [attributes, setAttributes] = useState('{}')
  const [segments, setSegments] = useState('')
  const [answer, setAnswer] = useState<TestAnswer | null>(null)
  const test = useAction(async () => {
    setAnswer(null)
    const parse = (text: string, what: string): unknown => { try { return JSON.parse(text) } catch { throw new Error(`${what} is not valid JSON.`) } }
    setAnswer(await call<TestAnswer>('POST', accountPath(`/campaigns/${enc(id)}/test`), {
      event: parse(event, 'The event'), attributes: parse(attributes, 'The attributes'), segments: toList(segments),
    }))
  })
  return (
    <section class='card' aria-labelledby='test-title'>
      <h2 id='test-title'>Test an event</h2>
      <p class='note'>Whether this campaign (as saved) would be answered for an event and a visitor's state. Nothing is recorded.</p>
      <form onSubmit={test.run}>
        <div class='grid'>
          <Field label='Event (JSON)' wide><textarea rows={6} spellcheck={false} value={event} onInput={e => setEvent(e.currentTarget.value)} /></Field>
          <Field label='Visitor attributes (JSON)'><textarea rows={3} spellcheck={false} value={attributes} onInput={e => setAttributes(e.currentTarget.value)} /></Field>
          <Field label='Visitor segments' hint='Comma-separated.'><input value={segments} onInput={e => setSegments(e.currentTarget.value)} /></Field>
        </div>
        <button type='submit' disabled={test.busy}>Test</button>
        <Outcome action={test} />
      </form>
      {answer !== null && (
        <div class='test-answer'>
          <p class={answer.matched ? 'verdict ok' : 'verdict no'} role='status'>{answer.matched ? 'Matched: the campaign would be answered.' : 'Not matched.'}</p>
          <Table
            caption='Checks' rows={answer.checks} empty='No checks.'
            columns={[{ head: 'Check', cell: c => c.check }, { head: 'Result', cell: c => c.ok ? 'pass' : 'fail' }, { head: 'Detail', cell: c => c.detail }]}
          />
        </div>
      )}
    </section>
  )
}
