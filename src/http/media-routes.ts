// Media: images uploaded as the raw body (the type decided by their bytes), listed, deleted, and
// served publicly at a stable URL with long caching and headers that keep a browser from treating the
// bytes as anything but an image.

import { ApiError } from '../errors.js'
import { MEDIA_NAME_MAX, type MediaStore } from '../media/media-store.js'
import type { Registry } from '../store/registry.js'
import { CACHE_IMMUTABLE, serveFile } from './static-files.js'
import { accountParam } from './access.js'
import type { Route } from './server.js'

/** Headers of every served image, on top of serveFile's (ETag, Cache-Control, nosniff). */
export const MEDIA_HEADERS = { 'Content-Security-Policy': 'default-src \'none\'; img-src \'self\'' } as const

export function mediaRoutes ({ registry, media }: { registry: Registry, media: MediaStore }): Route[] {
  return [
    {
      method: 'post', pattern: '/admin/accounts/:account/media', body: 'raw', role: 'editor',
      async handler (request) {
        const account = accountParam(request, registry)
        const name = new URLSearchParams(request.query).get('name') ?? 'upload'
        if (name.length < 1 || name.length > MEDIA_NAME_MAX || /[\u0000-\u001f\u007f/\\]/.test(name)) {
          throw new ApiError('invalid_field', `name must be 1 to ${MEDIA_NAME_MAX} characters without slashes or control characters.`, '/name')
        }
        return { status: 201, body: await media.upload(account, name, request.body as Buffer) }
      },
    },
    {
      method: 'get', pattern: '/admin/accounts/:account/media', body: false, role: 'viewer',
      handler (request) {
        const account = accountParam(request, registry)
        return { status: 200, body: { media: media.list(account) } }
      },
    },
    {
      method: 'del', pattern: '/admin/accounts/:account/media/:id', body: false, role: 'editor',
      async handler (request) {
        const account = accountParam(request, registry)
        await media.remove(account, request.params[1] ?? '')
        return { status: 204, body: undefined }
      },
    },
    {
      method: 'get', pattern: '/media/:account/:id', body: false,
      handler (request) {
        const account = request.params[0] ?? ''
        const file = registry.activeAccount(account) === undefined ? null : media.file(account, request.params[1] ?? '')
        if (file === null) throw new ApiError('media_not_found')
        return serveFile(request, file, CACHE_IMMUTABLE, MEDIA_HEADERS)
      },
    },
  ]
}
