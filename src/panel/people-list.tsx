import type { JSX } from 'preact'
import { Table, formatTime } from './ui'

/** One person as the admin API's people listings answer it (GET …/people, …/people/recent, POST …/segments-preview). */
export interface PersonRow {
  kind: 'visitor' | 'profile'
  id: string
  attributes: Record<string, unknown>
  profileId: string | null
  lastActive: string | null
  visitors: number
}

/** How far a listing went: every record of the account, or the first `scanned` of them. */
export interface ScanState { scanned: number, complete: boolean, next: string | null }

const ATTRIBUTES_SHOWN = 3

function attributeSummary (attributes: Record<string, unknown>): string {
  const entries = Object.entries(attributes)
  if (entries.length === 0) return '—'
  const shown = entries.slice(0, ATTRIBUTES_SHOWN).map(([name, value]) => `${name}: ${typeof value === 'string' ? value : JSON.stringify(value)}`)
  return entries.length > ATTRIBUTES_SHOWN ? `${shown.join(', ')} (+${entries.length - ATTRIBUTES_SHOWN} more)` : shown.join(', ')
}

/** A table of people; each id opens its record (`open`). */
export function PeopleTable ({ caption, rows, empty, open }: { caption: string, rows: PersonRow[], empty: string, open?: (person: PersonRow) => void }): JSX.Element {
  return (
    <Table
      caption={caption} rows={rows} empty={empty}
      columns={[
        {
          head: rows[0]?.kind === 'profile' ? 'Profile' : 'Visitor',
          cell: p => open === undefined ? <code>{p.id}</code> : <button type='button' class='link' onClick={() => open(p)} aria-label={`Open ${p.kind} ${p.id}`}><code>{p.id}</code></button>,
        },
        { head: 'Attributes', cell: p => attributeSummary(p.attributes) },
        p0Head(rows),
      ]}
    />
  )
}

function p0Head (rows: PersonRow[]): { head: string, cell: (p: PersonRow) => string } {
  return rows[0]?.kind === 'profile'
    ? { head: 'Devices', cell: p => String(p.visitors) }
    : { head: 'Last active', cell: p => formatTime(p.lastActive) }
}

/** "Examined all 1,204 records." or "Examined the first 10,000 records." */
export function scanNote (scanned: number, complete: boolean): string {
  const n = scanned.toLocaleString('en-US')
  return complete ? `Examined all ${n} record${scanned === 1 ? '' : 's'} of the account.` : `Examined ${n} records so far: not every record of the account yet.`
}
