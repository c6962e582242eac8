// GET /sdk/beacon.js (classic script, global `Beacon`) and /sdk/beacon.mjs (ES module): the browser
// SDK built from src/sdk, read once at start and served from memory. The names are stable (sites
// paste them once), so caching is an hour with an ETag (then a 304) rather than immutable: a fixed
// SDK reaches every visitor within the hour. Any origin may load them: a module script is fetched
// in CORS mode.

import { ApiError } from '../errors.js'
import { loadStaticFiles, serveFile, type StaticFile } from './static-files.js'
import { errorReply } from './server.js'
import type { RouteDefinition } from './route.js'
import * as R from './reply-schemas.js'
import { PACKAGE_ROOT } from '../package-root.js'

/** Where `npm run build` writes the SDK bundles. */
export const SDK_DIR = `${PACKAGE_ROOT}dist/web/sdk/`
export const SDK_CACHE = 'public, max-age=3600'
const HEADERS = { 'Access-Control-Allow-Origin': '*' }

/** The two builds, and what the document says of each. */
const FILES = [
  { name: 'beacon.js', kind: 'classic script', about: 'A classic script: defines the global Beacon.' },
  { name: 'beacon.mjs', kind: 'ES module', about: 'An ES module: import { Beacon } from it.' },
]

export function sdkRoutes (files: ReadonlyMap<string, StaticFile> = loadStaticFiles(SDK_DIR)): RouteDefinition[] {
  return FILES.map(({ name, kind, about }): RouteDefinition => ({
    method: 'get',
    pattern: `/sdk/${name}`,
    body: false,
    doc: {
      summary: `The browser SDK (${kind})`,
      description: `Built from src/sdk. Cache-Control: public, max-age=3600, with an ETag (If-None-Match: 304); docs/sdk.md. ${about}`,
      tag: 'Browsers',
      ok: { status: 200, description: 'The script.', schema: R.ScriptText, contentType: 'text/javascript; charset=utf-8' },
      errors: ['not_found'],
    },
    handler: request => {
      const file = files.get(name)
      return file === undefined ? errorReply(new ApiError('not_found', 'The SDK was not built (npm run build).')) : serveFile(request, file, SDK_CACHE, HEADERS)
    },
  }))
}
