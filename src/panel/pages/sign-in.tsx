import type { JSX } from 'preact'
import { useState } from 'preact/hooks'
import { call, user, type User } from '../api'
import { Field, Outcome, useAction } from '../ui'

export function SignIn (): JSX.Element {
  const [email, setEmail] = useState('')
  const [password, setPassword] = useState('')
  const action = useAction(async () => {
    const answer = await call<{ user: User }>('POST', '/admin/session', { email, password })
    user.value = answer.user
  })
  return (
    <main id='main' class='sign-in'>
      <form onSubmit={action.run} aria-labelledby='sign-in-title'>
        <h1 id='sign-in-title'>Sign in to Beacon</h1>
        <Field label='Email'><input type='email' autoComplete='username' required value={email} onInput={e => setEmail(e.currentTarget.value)} /></Field>
        <Field label='Password'><input type='password' autoComplete='current-password' required value={password} onInput={e => setPassword(e.currentTarget.value)} /></Field>
        <button type='submit' disabled={action.busy}>Sign in</button>
        <Outcome action={action} />
      </form>
    </main>
  )
}
