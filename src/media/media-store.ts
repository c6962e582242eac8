// Uploaded images, per account, in LMDB: the description under [account, 'meta', id] (listed without
// reading any image) and the bytes under [account, 'data', id]. An id is never reused and its bytes
// never change, so the public URL may be cached for good.

import { createHash, randomBytes } from 'node:crypto'
import { ApiError } from '../errors.js'
import type { Clock } from '../clock.js'
import type { Store } from '../store/store.js'
import { sniffImage, type MediaType } from './signature.js'

/** Images per account are bounded (the panel lists them whole; the store holds them all). */
export const MEDIA_PER_ACCOUNT_MAX = 1000
export const MEDIA_NAME_LENGTH_MAX = 200

export interface Media {
  id: string
  name: string
  type: MediaType
  bytes: number
  url: string
  createdAt: string
}

interface MediaMeta extends Omit<Media, 'url'> {
  etag: string
}

/** An image as served: its bytes, stored type and strong ETag (what the HTTP layer's serveFile takes). */
export interface MediaFile {
  body: Buffer
  contentType: MediaType
  etag: string
}

export class MediaStore {
  private readonly store: Store
  private readonly clock: Clock

  constructor (store: Store, clock: Clock) {
    this.store = store
    this.clock = clock
  }

  async upload (account: string, name: string, bytes: Buffer): Promise<Media> {
    const type = sniffImage(bytes)
    if (type === null) throw new ApiError('media_type_unsupported')
    if (this.count(account) >= MEDIA_PER_ACCOUNT_MAX) throw new ApiError('conflict', `An account has at most ${MEDIA_PER_ACCOUNT_MAX} media; delete some first.`)
    const meta: MediaMeta = {
      id: randomBytes(12).toString('base64url'),
      name,
      type,
      bytes: bytes.length,
      createdAt: new Date(this.clock.nowMs()).toISOString(),
      etag: `"${createHash('sha256').update(bytes).digest('base64url').slice(0, 27)}"`,
    }
    this.store.ignoreFailure(this.store.media.put([account, 'data', meta.id], bytes))
    await this.store.save(this.store.media, [account, 'meta', meta.id], meta)
    return withUrl(account, meta)
  }

  list (account: string): Media[] {
    const out: Media[] = []
    for (const { value } of this.store.media.getRange({ start: [account, 'meta'], end: [account, 'meta\u0000'] })) out.push(withUrl(account, value as MediaMeta))
    return out
  }

  async remove (account: string, id: string): Promise<void> {
    if (this.store.media.get([account, 'meta', id]) === undefined) throw new ApiError('media_not_found')
    this.store.ignoreFailure(this.store.media.remove([account, 'data', id]))
    await this.store.durable(this.store.media.remove([account, 'meta', id]))
  }

  /** The image as a file to serve, or null. */
  file (account: string, id: string): MediaFile | null {
    const meta = this.store.media.get([account, 'meta', id]) as MediaMeta | undefined
    if (meta === undefined) return null
    const body = this.store.media.get([account, 'data', id]) as Buffer | undefined
    if (body === undefined) return null
    return { body, contentType: meta.type, etag: meta.etag }
  }

  private count (account: string): number {
    return this.store.media.getKeysCount({ start: [account, 'meta'], end: [account, 'meta\u0000'] })
  }
}

function withUrl (account: string, meta: MediaMeta): Media {
  const { etag: _etag, ...rest } = meta
  return { ...rest, url: `/media/${account}/${meta.id}` }
}
