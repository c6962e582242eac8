// The part of a panel route after its section, decoded: null when it is not valid percent-encoding
// (`/panel/campaigns/%E0%A4%A`), which the shell shows as a page that does not exist. An unguarded
// decodeURIComponent threw there and left the panel on "Loading" (issue 27).

export function decodeRest (rest: string): string | null {
  try {
    return decodeURIComponent(rest)
  } catch {
    return null
  }
}
