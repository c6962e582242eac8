// The management panel (a single-page app over the admin API), served from memory: /panel/ and every
// client-side route answer index.html (revalidated through its ETag), the hashed assets are cached for a
// year. The HTML carries a strict Content-Security-Policy (scripts and styles from this origin only, no
// inline script), refuses framing, and sends no referrer.

import { ApiError } from '../errors.js'
import { CACHE_IMMUTABLE, CACHE_REVALIDATE, loadStaticFiles, serveFile, type StaticFile } from './static-files.js'
import type { Request } from './server.js'
import type { RouteDefinition } from './route.js'
import { PACKAGE_ROOT } from '../package-root.js'

/** The built panel, whether the server runs built or from its sources. */
export const PANEL_DIR = `${PACKAGE_ROOT}dist/web/panel/`

export const PANEL_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy': "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
}

/** The panel's files are not part of the API: served, but not in /openapi.json (`doc: null`). */
export function panelRoutes (files: Map<string, StaticFile> = loadStaticFiles(PANEL_DIR)): RouteDefinition[] {
  const index = (request: Request): ReturnType<typeof serveFile> => {
    const file = files.get('index.html')
    if (file === undefined) throw new ApiError('not_found', 'The panel is not built: run npm run build.')
    return serveFile(request, file, CACHE_REVALIDATE, PANEL_HEADERS)
  }
  return [
    { method: 'get', pattern: '/panel', body: false, doc: null, handler: () => ({ status: 301, contentType: 'text/plain', headers: { Location: '/panel/' }, body: '' }) },
    {
      method: 'get', pattern: '/panel/assets/*', body: false, doc: null,
      handler: request => {
        const file = files.get(request.url.slice('/panel/'.length))
        if (file === undefined) throw new ApiError('not_found')
        return serveFile(request, file, CACHE_IMMUTABLE)
      },
    },
    { method: 'get', pattern: '/panel/*', body: false, doc: null, handler: index },
  ]
}
