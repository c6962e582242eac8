import type { JSX } from 'preact'
import { useState } from 'preact/hooks'
import { accountPath, call, enc } from '../api'
import { CopyButton, Field, Loaded, Outcome, Page, Table, formatTime, fromList, toList, useAction, useLoad } from '../ui'

interface Token { id: string, name: string, attributes: string[], access: string, ratePerSecond: number | null, createdAt: string, revokedAt: string | null, token?: string }

export function Tokens (): JSX.Element {
  const load = useLoad(() => call<{ tokens: Token[] }>('GET', accountPath('/tokens')), [])
  const [name, setName] = useState('')
  const [attributes, setAttributes] = useState('*')
  const [access, setAccess] = useState('read-write')
  const [rate, setRate] = useState('')
  const [created, setCreated] = useState<Token | null>(null)
  const create = useAction(async () => {
    setCreated(null)
    const token = await call<Token>('POST', accountPath('/tokens'), { name, attributes: toList(attributes), access, ...(rate === '' ? {} : { ratePerSecond: Number(rate) }) })
    setCreated(token)
    setName('')
    load.reload()
  })
  const revoke = useAction(async (token: Token) => {
    if (!confirm(`Revoke the token ${token.name}? Requests using it are refused at once.`)) return
    await call('DELETE', accountPath(`/tokens/${enc(token.id)}`))
    load.reload()
    return `Revoked ${token.name}.`
  })
  return (
    <Page title='API tokens'>
      <form class='card' onSubmit={create.run} aria-labelledby='new-token'>
        <h2 id='new-token'>New token</h2>
        <div class='grid'>
          <Field label='Token name'><input required maxLength={200} value={name} onInput={e => setName(e.currentTarget.value)} /></Field>
          <Field label='Attributes' hint='Comma-separated names, or * for every attribute.'><input required value={attributes} onInput={e => setAttributes(e.currentTarget.value)} /></Field>
          <Field label='Access'>
            <select value={access} onChange={e => setAccess(e.currentTarget.value)}>
              <option value='read'>read</option><option value='write'>write</option><option value='read-write'>read-write</option>
            </select>
          </Field>
          <Field label='Rate limit (requests per second)' hint='Empty: no limit.'><input type='number' min={1} step='any' value={rate} onInput={e => setRate(e.currentTarget.value)} /></Field>
        </div>
        <button type='submit' disabled={create.busy}>Create token</button>
        <Outcome action={create} />
      </form>
      {created?.token !== undefined && (
        <div class='card secret' role='status'>
          <p><strong>Copy the token {created.name} now:</strong> it is shown only this once.</p>
          <div class='row'><code class='token' data-testid='new-token'>{created.token}</code><CopyButton text={created.token} /></div>
        </div>
      )}
      <Outcome action={revoke} />
      <Loaded load={load} what='tokens'>{({ tokens }) => (
        <Table
          caption='API tokens' rows={tokens} empty='No tokens yet.'
          columns={[
            { head: 'Name', cell: t => t.name },
            { head: 'Id', cell: t => <code>{t.id}</code> },
            { head: 'Attributes', cell: t => fromList(t.attributes) },
            { head: 'Access', cell: t => t.access },
            { head: 'Rate', cell: t => t.ratePerSecond === null ? '—' : `${t.ratePerSecond}/s` },
            { head: 'Created', cell: t => formatTime(t.createdAt) },
            { head: 'State', cell: t => t.revokedAt === null ? 'active' : `revoked ${formatTime(t.revokedAt)}` },
            { head: 'Actions', cell: t => t.revokedAt === null && <button type='button' class='danger' onClick={() => revoke.run(t)} aria-label={`Revoke ${t.name}`}>Revoke</button> },
          ]}
        />
      )}
      </Loaded>
    </Page>
  )
}
