// The panel's shell: checks the session, then shows the sign-in page or the navigation and the page
// the route names. Pages the role cannot use are left out of the navigation (the server refuses anyway).

import './styles.css'
import 'uplot/dist/uPlot.min.css'
import { render, type JSX } from 'preact'
import { useEffect, useState } from 'preact/hooks'
import { accountName, accountPath, call, can, user, type Role, type User } from './api'
import { route } from './router'
import { decodeRest } from './route-path'
import { Link, Loading } from './ui'
import { SignIn } from './pages/sign-in'
import { Campaigns } from './pages/campaigns'
import { ExperimentResultsPage } from './pages/experiment'
import { CampaignEditor } from './pages/campaign-editor'
import { Reports } from './pages/reports'
import { SavedReports } from './pages/saved-reports'
import { Webhooks } from './pages/webhooks'
import { WebhookEditor } from './pages/webhook-editor'
import { DestinationEditor, Destinations } from './pages/destinations'
import { Audiences } from './pages/audiences'
import { Media } from './pages/media'
import { Tokens } from './pages/tokens'
import { Events } from './pages/events'
import { People } from './pages/people'
import { Users } from './pages/users'
import { Audit } from './pages/audit'

interface Section { path: string, title: string, role: Role, page: (rest: string) => JSX.Element }

const SECTIONS: Section[] = [
  { path: 'campaigns', title: 'Campaigns', role: 'viewer', page: rest => rest === '' ? <Campaigns /> : rest.endsWith('/results') ? <ExperimentResultsPage id={rest.slice(0, -'/results'.length)} /> : <CampaignEditor id={rest} /> },
  { path: 'reports', title: 'Reports', role: 'viewer', page: () => <Reports /> },
  { path: 'saved-reports', title: 'Report builder', role: 'viewer', page: () => <SavedReports /> },
  { path: 'audiences', title: 'Audiences', role: 'viewer', page: () => <Audiences /> },
  { path: 'webhooks', title: 'Webhooks', role: 'viewer', page: rest => rest === '' ? <Webhooks /> : <WebhookEditor id={rest} /> },
  { path: 'destinations', title: 'Destinations', role: 'viewer', page: rest => rest === '' ? <Destinations /> : <DestinationEditor id={rest} /> },
  { path: 'media', title: 'Media', role: 'viewer', page: () => <Media /> },
  { path: 'events', title: 'Events', role: 'viewer', page: () => <Events /> },
  { path: 'people', title: 'People', role: 'viewer', page: () => <People /> },
  { path: 'tokens', title: 'API tokens', role: 'owner', page: () => <Tokens /> },
  { path: 'users', title: 'Users', role: 'owner', page: () => <Users /> },
  { path: 'audit', title: 'Audit log', role: 'owner', page: () => <Audit /> },
]

function App (): JSX.Element {
  // The probe answers 200 signed in or not: a signed-out visit logs no failed request in the console.
  useEffect(() => {
    call<{ signedIn: boolean, user?: User }>('GET', '/admin/session/state')
      .then(answer => { user.value = answer.user ?? null }, () => { user.value = null })
  }, [])
  const current = user.value
  const account = current?.account
  useEffect(() => {
    accountName.value = null
    if (account === undefined) return
    call<{ name: string }>('GET', accountPath()).then(answer => { accountName.value = answer.name }, () => { accountName.value = null })
  }, [account])
  if (current === undefined) return <main id='main'><Loading what='the panel' /></main>
  if (current === null) return <SignIn />
  const [head = '', ...tail] = route.value.split('/')
  const found = SECTIONS.find(s => s.path === (head === '' ? 'campaigns' : head))
  const rest = decodeRest(tail.join('/'))
  const section = rest === null ? undefined : found
  return (
    <div class='shell'>
      <a class='skip' href='#main'>Skip to content</a>
      <Nav current={found?.path ?? ''} />
      <main id='main'>
        {section === undefined ? <p>No such page.</p>
          : !can(section.role) ? <p role='alert'>Your role ({current.role}) cannot open this page.</p>
              : section.page(rest ?? '')}
      </main>
    </div>
  )
}

function Nav ({ current }: { current: string }): JSX.Element {
  const [open, setOpen] = useState(false)
  useEffect(() => setOpen(false), [route.value])
  const signOut = (): void => {
    call('DELETE', '/admin/session').finally(() => { user.value = null })
  }
  return (
    <header class='top'>
      <div class='brand'>Beacon{accountName.value !== null && <span class='account' title='Account'>{accountName.value}</span>}</div>
      <button type='button' class='menu secondary' aria-expanded={open} aria-controls='nav' onClick={() => setOpen(!open)}>Menu</button>
      <nav id='nav' aria-label='Sections' class={open ? 'open' : ''}>
        <ul>
          {SECTIONS.filter(s => can(s.role)).map(s => (
            <li key={s.path}><Link to={s.path} current={s.path === current}>{s.title}</Link></li>
          ))}
        </ul>
        <div class='who'>
          <span>{user.value?.email} <span class='badge'>{user.value?.role}</span></span>
          <button type='button' class='secondary' onClick={signOut}>Sign out</button>
        </div>
      </nav>
    </header>
  )
}

render(<App />, document.getElementById('app')!)
