// GET /sdk/beacon.js (classic script, global `Beacon`) and /sdk/beacon.mjs (ES module): the browser
// SDK built from src/sdk, read once at start and served from memory. The names are stable (sites
// paste them once), so caching is an hour with an ETag (then a 304) rather than immutable: a fixed
// SDK reaches every visitor within the hour. Any origin may load them: a module script is fetched
// in CORS mode.

import { ApiError } from '../errors.js'
import { loadStaticFiles, serveFile, type StaticFile } from './static-files.js'
import { errorReply, type Route } from './server.js'

const ROOT = new URL(import.meta.url.includes('/dist/src/') ? '../../../' : '../../', import.meta.url).pathname

/** Where `npm run build` writes the SDK bundles. */
export const SDK_DIR = `${ROOT}dist/web/sdk/`
export const SDK_CACHE = 'public, max-age=3600'
const HEADERS = { 'Access-Control-Allow-Origin': '*' }

export function sdkRoutes (files: ReadonlyMap<string, StaticFile> = loadStaticFiles(SDK_DIR)): Route[] {
  return ['beacon.js', 'beacon.mjs'].map(name => ({
    method: 'get',
    pattern: `/sdk/${name}`,
    body: false,
    handler: request => {
      const file = files.get(name)
      return file === undefined ? errorReply(new ApiError('not_found', 'The SDK was not built (npm run build).')) : serveFile(request, file, SDK_CACHE, HEADERS)
    },
  }))
}
