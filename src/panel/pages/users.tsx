import type { JSX } from 'preact'
import { useState } from 'preact/hooks'
import { accountPath, call, enc, user, type Role, type User } from '../api'
import { Field, Loaded, Outcome, Page, Table, formatTime, useAction, useLoad } from '../ui'

const ROLES: Role[] = ['viewer', 'editor', 'owner']

export function Users (): JSX.Element {
  const load = useLoad(() => call<{ users: User[] }>('GET', accountPath('/users')), [])
  const [email, setEmail] = useState('')
  const [name, setName] = useState('')
  const [password, setPassword] = useState('')
  const [role, setRole] = useState<Role>('viewer')
  const add = useAction(async () => {
    await call('POST', accountPath('/users'), { email, password, role, ...(name === '' ? {} : { name }) })
    setEmail(''); setName(''); setPassword('')
    load.reload()
    return `Added ${email}.`
  })
  const change = useAction(async ({ target, next }: { target: User, next: Role }) => {
    await call('PATCH', accountPath(`/users/${enc(target.id)}`), { role: next })
    load.reload()
    return `${target.email} is now ${next}.`
  })
  const remove = useAction(async (target: User) => {
    if (!confirm(`Remove ${target.email}? Their sessions end at once.`)) return
    await call('DELETE', accountPath(`/users/${enc(target.id)}`))
    load.reload()
    return `Removed ${target.email}.`
  })
  return (
    <Page title='Users'>
      <form class='card' onSubmit={add.run} aria-labelledby='new-user'>
        <h2 id='new-user'>Add a user</h2>
        <div class='grid'>
          <Field label='User email'><input type='email' required value={email} onInput={e => setEmail(e.currentTarget.value)} /></Field>
          <Field label='User name'><input value={name} onInput={e => setName(e.currentTarget.value)} /></Field>
          <Field label='Initial password' hint='12 to 256 characters; tell it to them in person.'><input type='password' autoComplete='new-password' required minLength={12} maxLength={256} value={password} onInput={e => setPassword(e.currentTarget.value)} /></Field>
          <Field label='Role'><select value={role} onChange={e => setRole(e.currentTarget.value as Role)}>{ROLES.map(r => <option key={r} value={r}>{r}</option>)}</select></Field>
        </div>
        <button type='submit' disabled={add.busy}>Add user</button>
        <Outcome action={add} />
      </form>
      <p class='note'>Viewers read everything but tokens, users and exports, and see reports. Editors also change event types, campaigns, segments, webhooks and media. Owners do everything, including users, tokens, exports, erasure and the audit log.</p>
      <Outcome action={change} /><Outcome action={remove} />
      <Loaded load={load} what='users'>{({ users }) => (
        <Table
          caption='Users' rows={users} empty='No users.'
          columns={[
            { head: 'Email', cell: u => u.email },
            { head: 'Name', cell: u => u.name ?? '' },
            {
              head: 'Role', cell: u => (
                <select aria-label={`Role of ${u.email}`} value={u.role} disabled={u.id === user.value?.id} onChange={e => change.run({ target: u, next: e.currentTarget.value as Role })}>
                  {ROLES.map(r => <option key={r} value={r}>{r}</option>)}
                </select>)
            },
            { head: 'Added', cell: u => formatTime(u.createdAt) },
            { head: 'Actions', cell: u => u.id !== user.value?.id && <button type='button' class='danger' onClick={() => remove.run(u)} aria-label={`Remove ${u.email}`}>Remove</button> },
          ]}
        />
      )}
      </Loaded>
    </Page>
  )
}
