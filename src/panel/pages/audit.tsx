import type { JSX } from 'preact'
import { useState } from 'preact/hooks'
import { accountPath, call } from '../api'
import { Loaded, Page, Table, formatTime, useLoad } from '../ui'

interface Entry {
  id: string
  at: string
  actor: { type: 'admin' } | { type: 'user', id: string, email: string }
  action: string
  entity: string
  entityId: string
  summary: string
}

export function Audit (): JSX.Element {
  const [cursors, setCursors] = useState<string[]>([''])
  const cursor = cursors[cursors.length - 1]!
  const load = useLoad(() => call<{ entries: Entry[], next: string | null }>('GET', accountPath(`/audit?limit=50${cursor === '' ? '' : `&cursor=${encodeURIComponent(cursor)}`}`)), [cursor])
  return (
    <Page title='Audit log' actions={<button type='button' class='secondary' onClick={() => { setCursors(['']); load.reload() }}>Newest</button>}>
      <Loaded load={load} what='the audit log'>{({ entries, next }) => <>
        <Table
          caption='Audit log, newest first' rows={entries} empty='Nothing recorded yet.'
          columns={[
            { head: 'When', cell: e => formatTime(e.at) },
            { head: 'Who', cell: e => e.actor.type === 'admin' ? 'admin key' : e.actor.email },
            { head: 'Action', cell: e => e.action },
            { head: 'Entity', cell: e => `${e.entity} ${e.entityId}` },
            { head: 'Change', cell: e => e.summary },
          ]}
        />
        <div class='row'>
          {cursors.length > 1 && <button type='button' class='secondary' onClick={() => setCursors(cursors.slice(0, -1))}>Newer</button>}
          {next !== null && <button type='button' class='secondary' onClick={() => setCursors([...cursors, next])}>Older</button>}
        </div>
      </>}
      </Loaded>
    </Page>
  )
}
