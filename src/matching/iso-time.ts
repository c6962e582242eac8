// ISO-8601 instants for campaign schedules. A zone is required (Z or ±HH:MM) because a local
// time means nothing to a server; a bare date is taken as UTC midnight, as Date.parse does.
// Parsed by hand so that impossible dates (Feb 30, hour 24) are refused instead of rolled over.

const ISO = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}:\d{2}))?$/

/** Epoch milliseconds, or null when the text is not an accepted ISO-8601 instant. */
export function parseIsoMs (text: string): number | null {
  const m = ISO.exec(text)
  if (m === null) return null
  const year = Number(m[1])
  const month = Number(m[2])
  const day = Number(m[3])
  const hour = m[4] === undefined ? 0 : Number(m[4])
  const minute = m[5] === undefined ? 0 : Number(m[5])
  const second = m[6] === undefined ? 0 : Number(m[6])
  const ms = m[7] === undefined ? 0 : Number(m[7].slice(0, 3).padEnd(3, '0'))
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return null
  // setUTCFullYear, unlike Date.UTC, does not read years 0..99 as 1900..1999.
  const date = new Date(0)
  date.setUTCFullYear(year, month - 1, day)
  // Feb 30 rolls over to Mar 1; a changed day means the date does not exist.
  if (date.getUTCDate() !== day) return null
  const base = date.getTime() + ((hour * 60 + minute) * 60 + second) * 1000 + ms
  const zone = m[8]
  if (zone === undefined || zone === 'Z') return base
  const zh = Number(zone.slice(1, 3))
  const zm = Number(zone.slice(4, 6))
  if (zh > 23 || zm > 59) return null
  const offsetMs = (zh * 60 + zm) * 60_000
  return zone[0] === '+' ? base - offsetMs : base + offsetMs
}
