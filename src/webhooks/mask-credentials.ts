// What a receiver answers with an error is kept (an excerpt, for the deliveries log admins read), and
// receivers echo what they should not: `db_password=…`, `"apiKey": "…"`, `Authorization: Bearer …`.
// Values of credential-looking keys and bearer tokens are masked before anything is stored.

export const MASK = '***'

const KEY = String.raw`[A-Za-z0-9_.-]*(?:pass(?:word|wd)?|secret|token|api[_-]?key|key|auth\w*|credential|session|cookie)[A-Za-z0-9_.-]*`

/** "key": "value" (JSON), the quote kept so the excerpt still reads as JSON. */
const QUOTED = new RegExp(String.raw`("${KEY}"\s*:\s*)"(?:[^"\\]|\\.)*"`, 'gi')
/** key=value and key: value (query strings, logs, headers): the value runs to a separator. */
const PLAIN = new RegExp(String.raw`(\b${KEY}\s*[=:]\s*)(?!\*\*\*)(?:Bearer\s+|Basic\s+)?[^\s&;,"'}<]+`, 'gi')
const BEARER = /\b(Bearer|Basic)\s+[A-Za-z0-9\-._~+/]+=*/gi

/** The text with the values of credential-looking keys and bearer tokens replaced by ***. */
export function maskCredentials (text: string): string {
  return text.replace(QUOTED, `$1"${MASK}"`).replace(PLAIN, `$1${MASK}`).replace(BEARER, `$1 ${MASK}`)
}
