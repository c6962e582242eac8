// Media: images uploaded as the raw body (the type decided by their bytes), listed, deleted, and
// served publicly at a stable URL with long caching and headers that keep a browser from treating the
// bytes as anything but an image.

import Type from 'typebox'
import { ApiError } from '../errors.js'
import { MEDIA_NAME_LENGTH_MAX, type MediaStore } from '../media/media-store.js'
import type { Catalogs } from '../catalog/catalogs.js'
import { CACHE_IMMUTABLE, serveFile } from './static-files.js'
import { accountParam } from './access.js'
import { json, type RouteDefinition } from './route.js'
import * as R from './reply-schemas.js'

/** Headers of every served image, on top of serveFile's (ETag, Cache-Control, nosniff). */
export const MEDIA_HEADERS = { 'Content-Security-Policy': 'default-src \'none\'; img-src \'self\'' } as const

export function mediaRoutes ({ catalogs, media }: { catalogs: Catalogs, media: MediaStore }): RouteDefinition[] {
  return [
    {
      method: 'post', pattern: '/admin/accounts/:account/media', body: 'raw', role: 'editor',
      doc: {
        summary: 'Upload an image',
        description: 'The body is the image itself (any Content-Type): PNG, JPEG, GIF or WebP, decided by its bytes; ' +
          'SVG and anything else get 415. At most BEACON_MEDIA_MAX_BYTES (2 MiB by default), and BEACON_MEDIA_PER_ACCOUNT_MAX (1000 by default) images per account (409 past it). ' +
          'In cluster mode answered once stored on a quorum of the cluster\'s JetStream (503 unavailable with Retry-After when NATS does not answer).',
        tag: 'Media',
        query: [{ name: 'name', description: `The file name shown in the panel (1 to ${MEDIA_NAME_LENGTH_MAX} characters, no slashes; default "upload").`, schema: Type.String() }],
        body: { schema: Type.String({ contentMediaType: 'application/octet-stream', description: 'The image bytes.' }), example: {}, raw: 'application/octet-stream' },
        ok: json(201, 'The stored image.', R.Media), errors: ['account_not_found', 'media_type_unsupported', 'invalid_field', 'conflict', 'unavailable'],
      },
      async handler (request) {
        const account = accountParam(request, catalogs)
        const name = new URLSearchParams(request.query).get('name') ?? 'upload'
        if (name.length < 1 || name.length > MEDIA_NAME_LENGTH_MAX || /[\u0000-\u001f\u007f/\\]/.test(name)) {
          throw new ApiError('invalid_field', `name must be 1 to ${MEDIA_NAME_LENGTH_MAX} characters without slashes or control characters.`, '/name')
        }
        return { status: 201, body: await media.upload(account, name, request.body as Buffer) }
      },
    },
    {
      method: 'get', pattern: '/admin/accounts/:account/media', body: false, role: 'viewer',
      doc: {
        summary: 'List the account\'s images', tag: 'Media',
        ok: json(200, 'The images (without their bytes).', Type.Object({ media: Type.Array(R.Media) })), errors: ['account_not_found'],
      },
      async handler (request) {
        const account = accountParam(request, catalogs)
        return { status: 200, body: { media: await media.list(account) } }
      },
    },
    {
      method: 'del', pattern: '/admin/accounts/:account/media/:id', body: false, role: 'editor',
      doc: {
        summary: 'Delete an image', description: 'Its public URL answers 404 from then on (in cluster mode through every node).', tag: 'Media',
        ok: { status: 204, description: 'Deleted.' }, errors: ['account_not_found', 'media_not_found', 'unavailable'],
      },
      async handler (request) {
        const account = accountParam(request, catalogs)
        await media.remove(account, request.params[1] ?? '')
        return { status: 204, body: undefined }
      },
    },
    {
      method: 'get', pattern: '/media/:account/:id', body: false,
      doc: {
        summary: 'An uploaded image (public)',
        description: 'Cache-Control: public, max-age=31536000, immutable; an ETag (304 on If-None-Match); X-Content-Type-Options: nosniff; ' +
          'Content-Security-Policy: default-src \'none\'; img-src \'self\'.',
        tag: 'Media',
        ok: { status: 200, description: 'The image, with its stored type.', schema: Type.String({ description: 'The bytes.' }), contentType: 'image/png' },
        also: [{ status: 304, description: 'Not modified (If-None-Match held the ETag).' }],
        errors: ['media_not_found', 'unavailable'],
      },
      async handler (request) {
        const account = request.params[0] ?? ''
        const file = catalogs.accounts.active(account) === undefined ? null : await media.file(account, request.params[1] ?? '')
        if (file === null) throw new ApiError('media_not_found')
        return serveFile(request, file, CACHE_IMMUTABLE, MEDIA_HEADERS)
      },
    },
  ]
}
