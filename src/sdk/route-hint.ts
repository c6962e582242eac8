// The route hint of a Beacon cluster (docs/cluster.md, "Routing requests to their owner"): Beacon names
// the node that owns this visitor in the Beacon-Route header of its answers; sent back with every
// request, a balancer with the route configuration (deploy/nginx-cluster.conf) sends it straight to that
// node instead of any (which would forward it: one more hop). The beacon_route cookie Beacon sets does
// not do it here: a page on another site sends Beacon no cookie (the SDK's requests carry no
// credentials). Kept in localStorage beside the visitor id (after consent only, as the id), so a new
// page's first request is routed too; forgotten with it. Embedded Beacon sends none: nothing is kept.

const KEY = 'beacon_route'
/** A node id (BEACON_NODE_ID): anything else read back from storage is not sent (it would make fetch throw). */
const NODE_ID = /^[A-Za-z0-9_-]{1,64}$/

let hint: string | null = null

export function loadRoute (): void {
  let kept: string | null = null
  try { kept = localStorage.getItem(KEY) } catch {}
  hint = kept !== null && NODE_ID.test(kept) ? kept : null
}

/** `headers` with the hint, when one is kept. */
export function routed (headers: Record<string, string>): Record<string, string> {
  if (hint !== null) headers['beacon-route'] = hint
  return headers
}

/** Keeps the hint of an answer (a cluster's). */
export function keepRoute (res: Response): void {
  const named = res.headers.get('beacon-route')
  if (named === null || named === hint || !NODE_ID.test(named)) return
  hint = named
  try { localStorage.setItem(KEY, named) } catch {}
}

/** Consent withdrawn: the hint goes with the visitor id. */
export function forgetRoute (): void {
  hint = null
  try { localStorage.removeItem(KEY) } catch {}
}
