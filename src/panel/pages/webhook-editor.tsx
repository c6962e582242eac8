import type { JSX } from 'preact'
import { useState } from 'preact/hooks'
import { accountPath, call, can, enc } from '../api'
import { navigate } from '../router'
import { ErrorNote, Field, Loading, Outcome, Page, Table, formatTime, fromList, toList, useAction, useLoad } from '../ui'

export interface Webhook {
  name: string
  enabled: boolean
  trigger: { kind: 'event' | 'audience' | 'schedule', events?: string[], segments?: string[], on?: string[], cron?: string, every?: string }
  request: {
    method: string, url: string, headers?: Record<string, string>,
    auth?: { type: 'basic', username: string, password: string } | { type: 'bearer', token: string },
    signingSecret?: string, payload?: string
  }
  delivery: { mode: 'sync' | 'async', timeoutMs: number, batchSize: number, maxAttempts?: number, ratePerSecond?: number, delayMs?: number, proxy?: string }
}

const EMPTY: Webhook = {
  name: '', enabled: true, trigger: { kind: 'event', events: ['purchase'] },
  request: { method: 'POST', url: 'https://' }, delivery: { mode: 'async', timeoutMs: 5000, batchSize: 1 },
}

export function WebhookEditor ({ id }: { id: string }): JSX.Element {
  const isNew = id === 'new'
  const load = useLoad(() => isNew ? Promise.resolve({ id: '', ...EMPTY }) : call<Webhook & { id: string }>('GET', accountPath(`/webhooks/${enc(id)}`)), [id])
  if (load.data === undefined) return <Page title='Webhook'>{load.error != null ? <ErrorNote error={load.error} /> : <Loading what='the webhook' />}</Page>
  const { id: _id, ...webhook } = load.data
  return (
    <Page title={isNew ? 'New webhook' : webhook.name}>
      <WebhookForm key={id} id={isNew ? null : id} initial={webhook} />
      {!isNew && <Deliveries id={id} />}
    </Page>
  )
}

const headersText = (headers: Record<string, string> | undefined): string => Object.entries(headers ?? {}).map(([k, v]) => `${k}: ${v}`).join('\n')
function parseHeaders (text: string): Record<string, string> | undefined {
  const headers: Record<string, string> = {}
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue
    const colon = line.indexOf(':')
    if (colon < 1) throw new Error(`Header line "${line}" needs a name, a colon and a value.`)
    headers[line.slice(0, colon).trim()] = line.slice(colon + 1).trim()
  }
  return Object.keys(headers).length === 0 ? undefined : headers
}
const optionalNumber = (text: string): number | undefined => text.trim() === '' ? undefined : Number(text)

function WebhookForm ({ id, initial }: { id: string | null, initial: Webhook }): JSX.Element {
  const [w, setW] = useState<Webhook>(initial)
  const [newId, setNewId] = useState('')
  const [headers, setHeaders] = useState(headersText(initial.request.headers))
  const editable = can('editor')
  const trigger = (patch: Partial<Webhook['trigger']>): void => setW(x => ({ ...x, trigger: { ...x.trigger, ...patch } }))
  const request = (patch: Partial<Webhook['request']>): void => setW(x => ({ ...x, request: { ...x.request, ...patch } }))
  const delivery = (patch: Partial<Webhook['delivery']>): void => setW(x => ({ ...x, delivery: { ...x.delivery, ...patch } }))
  const auth = w.request.auth

  const save = useAction(async () => {
    const target = id ?? newId
    const t = w.trigger
    const body: Webhook = {
      ...w,
      trigger: t.kind === 'event' ? { kind: 'event', events: t.events ?? [] }
        : t.kind === 'audience' ? { kind: 'audience', segments: t.segments ?? [], on: t.on ?? ['enter', 'exit'] }
          : { kind: 'schedule', ...(t.cron ? { cron: t.cron } : { every: t.every ?? '' }), ...(t.segments?.length ? { segments: t.segments } : {}) },
      request: { ...w.request, headers: parseHeaders(headers) },
    }
    await call('PUT', accountPath(`/webhooks/${enc(target)}`), JSON.parse(JSON.stringify(body)))
    if (id === null) navigate(`webhooks/${enc(target)}`)
    return 'Saved.'
  })
  const remove = useAction(async () => {
    if (id === null || !confirm(`Delete the webhook ${w.name}? Its delivery records stay.`)) return
    await call('DELETE', accountPath(`/webhooks/${enc(id)}`))
    navigate('webhooks')
  })
  const [tested, setTested] = useState<{ ok: boolean, status: number | null, durationMs: number, error?: string } | null>(null)
  const test = useAction(async () => {
    setTested(null)
    setTested(await call('POST', accountPath(`/webhooks/${enc(id ?? '')}/test`)))
  })

  return (
    <form onSubmit={save.run}>
      <fieldset disabled={!editable} class='plain'>
        {!editable && <p class='note'>Your role can read webhooks, not change them.</p>}
        <div class='grid'>
          <Field label='Name'><input required maxLength={200} value={w.name} onInput={e => setW({ ...w, name: e.currentTarget.value })} /></Field>
          {id === null && <Field label='Id' hint='Letters, digits, _ . : -'><input required pattern='[A-Za-z0-9_.:\-]{1,128}' value={newId} onInput={e => setNewId(e.currentTarget.value)} /></Field>}
          <Field label='Enabled'><input type='checkbox' checked={w.enabled} onChange={e => setW({ ...w, enabled: e.currentTarget.checked })} /></Field>
        </div>
        <h2>Trigger</h2>
        <div class='grid'>
          <Field label='Trigger kind'>
            <select value={w.trigger.kind} onChange={e => trigger({ kind: e.currentTarget.value as Webhook['trigger']['kind'] })}>
              <option value='event'>events</option><option value='audience'>segment enter / exit</option><option value='schedule'>schedule</option>
            </select>
          </Field>
          {w.trigger.kind === 'event' && <Field label='Event types' hint='Comma-separated; attributesUpdated and segmentsUpdated too.'>
            <input value={fromList(w.trigger.events)} onChange={e => trigger({ events: toList(e.currentTarget.value) })} />
          </Field>}
          {w.trigger.kind !== 'event' && <Field label='Segments' hint='Comma-separated.'>
            <input value={fromList(w.trigger.segments)} onChange={e => trigger({ segments: toList(e.currentTarget.value) })} />
          </Field>}
          {w.trigger.kind === 'audience' && ['enter', 'exit'].map(change => (
            <Field key={change} label={`On ${change}`}>
              <input
                type='checkbox' checked={(w.trigger.on ?? ['enter', 'exit']).includes(change)}
                onChange={e => { const on = (w.trigger.on ?? ['enter', 'exit']).filter(c => c !== change); trigger({ on: e.currentTarget.checked ? [...on, change].sort() : on }) }}
              />
            </Field>
          ))}
          {w.trigger.kind === 'schedule' && <>
            <Field label='Cron (UTC)' hint='5 or 6 fields; or leave empty and use Every.'><input value={w.trigger.cron ?? ''} onInput={e => trigger({ cron: e.currentTarget.value || undefined })} /></Field>
            <Field label='Every' hint='10s to 31d, e.g. 15m.'><input value={w.trigger.every ?? ''} onInput={e => trigger({ every: e.currentTarget.value || undefined })} /></Field>
          </>}
        </div>
        <h2>Request</h2>
        <div class='grid'>
          <Field label='Method'>
            <select value={w.request.method} onChange={e => request({ method: e.currentTarget.value })}>{['POST', 'PUT', 'GET', 'DELETE'].map(m => <option key={m}>{m}</option>)}</select>
          </Field>
          <Field label='URL' hint='http:// or https://; {{placeholders}} in path and query.' wide><input required type='text' value={w.request.url} onInput={e => request({ url: e.currentTarget.value })} /></Field>
          <Field label='Headers' hint='One Name: value per line.' wide><textarea rows={3} spellcheck={false} value={headers} onInput={e => setHeaders(e.currentTarget.value)} /></Field>
          <Field label='Authentication'>
            <select
              value={auth?.type ?? 'none'} onChange={e => {
                const type = e.currentTarget.value
                request({ auth: type === 'basic' ? { type, username: '', password: '' } : type === 'bearer' ? { type, token: '' } : undefined })
              }}
            >
              <option value='none'>none</option><option value='basic'>basic</option><option value='bearer'>bearer token</option>
            </select>
          </Field>
          {auth?.type === 'basic' && <>
            <Field label='Username'><input value={auth.username} onInput={e => request({ auth: { ...auth, username: e.currentTarget.value } })} /></Field>
            <Field label='Password' hint='[redacted] keeps the saved one.'><input type='password' autoComplete='new-password' value={auth.password} onInput={e => request({ auth: { ...auth, password: e.currentTarget.value } })} /></Field>
          </>}
          {auth?.type === 'bearer' && <Field label='Token' hint='[redacted] keeps the saved one.'><input type='password' autoComplete='off' value={auth.token} onInput={e => request({ auth: { ...auth, token: e.currentTarget.value } })} /></Field>}
          <Field label='Signing secret' hint='whsec_… (Standard Webhooks); empty: unsigned.'><input autoComplete='off' value={w.request.signingSecret ?? ''} onInput={e => request({ signingSecret: e.currentTarget.value || undefined })} /></Field>
          <Field label='Payload template' hint='JSON with {{placeholders}}; empty: the default payload.' wide>
            <textarea rows={4} spellcheck={false} value={w.request.payload ?? ''} onInput={e => request({ payload: e.currentTarget.value || undefined })} />
          </Field>
        </div>
        <h2>Delivery</h2>
        <div class='grid'>
          <Field label='Mode'><select value={w.delivery.mode} onChange={e => delivery({ mode: e.currentTarget.value as 'sync' | 'async' })}><option value='async'>async</option><option value='sync'>sync</option></select></Field>
          <Field label='Timeout (ms)'><input type='number' min={100} max={60000} required value={w.delivery.timeoutMs} onInput={e => delivery({ timeoutMs: Number(e.currentTarget.value) })} /></Field>
          <Field label='Batch size'><input type='number' min={1} max={1000} required value={w.delivery.batchSize} onInput={e => delivery({ batchSize: Number(e.currentTarget.value) })} /></Field>
          <Field label='Max attempts' hint='Default 8.'><input type='number' min={1} max={50} value={w.delivery.maxAttempts ?? ''} onInput={e => delivery({ maxAttempts: optionalNumber(e.currentTarget.value) })} /></Field>
          <Field label='Rate per second' hint='Empty: no limit.'><input type='number' min={1} step='any' value={w.delivery.ratePerSecond ?? ''} onInput={e => delivery({ ratePerSecond: optionalNumber(e.currentTarget.value) })} /></Field>
          <Field label='Delay (ms)'><input type='number' min={0} value={w.delivery.delayMs ?? ''} onInput={e => delivery({ delayMs: optionalNumber(e.currentTarget.value) })} /></Field>
          <Field label='Proxy' hint='http://host:port; empty: direct.'><input value={w.delivery.proxy ?? ''} onInput={e => delivery({ proxy: e.currentTarget.value || undefined })} /></Field>
        </div>
        <div class='row'>
          <button type='submit' disabled={save.busy}>Save webhook</button>
          {id !== null && <button type='button' class='secondary' onClick={test.run} disabled={test.busy}>Send test delivery</button>}
          {id !== null && <button type='button' class='danger' onClick={remove.run}>Delete</button>}
        </div>
        <Outcome action={save} /><Outcome action={remove} /><Outcome action={test} />
        {tested !== null && <p class={tested.ok ? 'verdict ok' : 'verdict no'} role='status'>
          Test delivery {tested.ok ? 'succeeded' : 'failed'}: status {tested.status ?? 'none'} in {tested.durationMs} ms{tested.error !== undefined ? ` (${tested.error})` : ''}.
        </p>}
      </fieldset>
    </form>
  )
}

interface Attempt { attempt: number, at: string, status?: number, latencyMs: number, error?: string }
interface Delivery { id: string, status: string, occurredAt: string, attempts: Attempt[], nextAttempt: number | null, dueAt: string | null, createdAt: string, context?: { event?: string } }

function Deliveries ({ id }: { id: string }): JSX.Element {
  const [status, setStatus] = useState('')
  // Each page's `after`, passed back as received: a number in embedded mode, an opaque string in a cluster.
  const [after, setAfter] = useState<string[]>([''])
  const page = after[after.length - 1]!
  const load = useLoad(() => call<{ deliveries: Delivery[], next: number | string | null }>('GET',
    accountPath(`/webhooks/${enc(id)}/deliveries?limit=50${page === '' ? '' : `&after=${enc(page)}`}${status === '' ? '' : `&status=${status}`}`)), [id, status, page])
  const replay = useAction(async (ids?: string[]) => {
    const answer = await call<{ replayed: number }>('POST', accountPath(`/webhooks/${enc(id)}/replay`), ids === undefined ? {} : { deliveryIds: ids })
    load.reload()
    return `Replayed ${answer.replayed}.`
  })
  const editable = can('editor')
  return (
    <section aria-labelledby='deliveries-title'>
      <div class='page-head'>
        <h2 id='deliveries-title'>Delivery log</h2>
        <div class='actions'>
          <Field label='Status'>
            <select value={status} onChange={e => { setStatus(e.currentTarget.value); setAfter(['']) }}>
              <option value=''>all</option>{['pending', 'failed', 'delivered', 'dead'].map(s => <option key={s} value={s}>{s}</option>)}
            </select>
          </Field>
          <button type='button' class='secondary' onClick={load.reload}>Refresh</button>
          {editable && <button type='button' class='secondary' onClick={() => replay.run(undefined)}>Replay all dead</button>}
        </div>
      </div>
      <Outcome action={replay} />
      {load.data === undefined ? (load.error != null ? <ErrorNote error={load.error} /> : <Loading what='deliveries' />) : <>
        <ErrorNote error={load.error} />
        <Table
          caption='Deliveries' rows={load.data.deliveries} empty='No deliveries.'
          columns={[
            { head: 'Delivery', cell: d => <code>{d.id}</code> },
            { head: 'Status', cell: d => <span class={`badge ${d.status}`}>{d.status}</span> },
            { head: 'Created', cell: d => formatTime(d.createdAt) },
            { head: 'Event', cell: d => d.context?.event ?? '—' },
            { head: 'Next attempt', cell: d => d.nextAttempt === null ? '—' : `#${d.nextAttempt} at ${formatTime(d.dueAt)}` },
            { head: 'Attempts', cell: d => <Attempts attempts={d.attempts} /> },
            {
              head: 'Actions', cell: d => editable && (d.status === 'dead' || d.status === 'delivered') &&
                <button type='button' class='secondary' onClick={() => replay.run([d.id])} aria-label={`Replay ${d.id}`}>Replay</button>
            },
          ]}
        />
        <div class='row'>
          {after.length > 1 && <button type='button' class='secondary' onClick={() => setAfter(after.slice(0, -1))}>Previous page</button>}
          {load.data.next !== null && <button type='button' class='secondary' onClick={() => setAfter([...after, String(load.data!.next!)])}>Next page</button>}
        </div>
      </>}
    </section>
  )
}

function Attempts ({ attempts }: { attempts: Attempt[] }): JSX.Element {
  if (attempts.length === 0) return <span>none yet</span>
  return (
    <details>
      <summary>{attempts.length} · last {attempts[attempts.length - 1]!.status ?? 'no answer'}</summary>
      <ol class='attempts'>{attempts.map(a => (
        <li key={a.attempt} value={a.attempt}>{formatTime(a.at)}: {a.status ?? 'no answer'} in {a.latencyMs} ms{a.error !== undefined ? ` (${a.error})` : ''}</li>
      ))}
      </ol>
    </details>
  )
}
