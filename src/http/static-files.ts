// Files Beacon serves as they are (the SDK bundle, the panel's assets): read once at start from the
// built folder into memory with their type and a strong ETag, then answered from memory: 304 when the
// client holds the same ETag, long-lived caching for names that change when their content does.

import { createHash } from 'node:crypto'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { extname, join, relative } from 'node:path'
import type { Reply, Request } from './server.js'

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.html': 'text/html; charset=utf-8',
  '.json': 'application/json',
  '.map': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
}

/** A year, immutable: for names that carry a hash of their content. */
export const CACHE_IMMUTABLE = 'public, max-age=31536000, immutable'
/** Revalidate every time (the ETag makes that a 304): for names that stay while their content changes. */
export const CACHE_REVALIDATE = 'no-cache'

export interface StaticFile {
  body: Buffer
  contentType: string
  etag: string
}

export function staticFile (body: Buffer, name: string): StaticFile {
  const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`
  return { body, contentType: TYPES[extname(name)] ?? 'application/octet-stream', etag }
}

/** Every file under `dir`, keyed by its path relative to it with '/' separators; empty if `dir` is absent. */
export function loadStaticFiles (dir: string): Map<string, StaticFile> {
  const files = new Map<string, StaticFile>()
  if (!existsSync(dir)) return files
  const walk = (folder: string): void => {
    for (const name of readdirSync(folder)) {
      const path = join(folder, name)
      if (statSync(path).isDirectory()) walk(path)
      else files.set(relative(dir, path).split('\\').join('/'), staticFile(readFileSync(path), name))
    }
  }
  walk(dir)
  return files
}

/** The reply for `file`: 304 when the request already holds it, else the bytes; `cacheControl` either way. */
export function serveFile (request: Request, file: StaticFile, cacheControl: string, headers: Record<string, string> = {}): Reply {
  const common = { ETag: file.etag, 'Cache-Control': cacheControl, 'X-Content-Type-Options': 'nosniff', ...headers }
  if (request.ifNoneMatch !== '' && etagMatches(request.ifNoneMatch, file.etag)) {
    return { status: 304, body: undefined, contentType: file.contentType, headers: common }
  }
  return { status: 200, body: file.body, contentType: file.contentType, headers: common }
}

/** If-None-Match holds a list of ETags (or *); weak ones (W/"…") match their strong form. */
function etagMatches (header: string, etag: string): boolean {
  if (header.trim() === '*') return true
  for (const part of header.split(',')) {
    const tag = part.trim()
    if (tag === etag || tag === `W/${etag}`) return true
  }
  return false
}
