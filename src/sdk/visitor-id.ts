// The visitor id: a UUID v4 made here, kept in localStorage, or in a first-party cookie where storage
// is unavailable (blocked, or full), so it is stable across reloads either way.

const KEY = 'beacon_vid'
const UUID4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
const TWO_YEARS_S = 63072000

/** crypto.randomUUID needs a secure context; getRandomValues works on plain http pages too. */
export function uuid4 (): string {
  const b = crypto.getRandomValues(new Uint8Array(16))
  b[6] = (b[6]! & 15) | 64
  b[8] = (b[8]! & 63) | 128
  const h = Array.from(b, x => (x + 256).toString(16).slice(1)).join('')
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`
}

export function loadVisitorId (): string {
  let id: string | null | undefined = null
  try { id = localStorage.getItem(KEY) } catch {}
  id ??= new RegExp(`(?:^|; )${KEY}=([^;]+)`).exec(document.cookie)?.[1]
  if (id == null || !UUID4.test(id)) id = uuid4()
  try {
    localStorage.setItem(KEY, id)
  } catch {
    writeCookie(`${id}; max-age=${TWO_YEARS_S}`)
  }
  return id
}

/** Consent withdrawn: nothing of the visitor stays on the device. */
export function forgetVisitorId (): void {
  try { localStorage.removeItem(KEY) } catch {}
  if (document.cookie.includes(KEY + '=')) writeCookie('; max-age=0')
}

function writeCookie (value: string): void {
  document.cookie = `${KEY}=${value}; path=/; samesite=lax${location.protocol === 'https:' ? '; secure' : ''}`
}
