// Uploaded images, per account. `MediaStore` is what the routes use; `LocalMediaStore` keeps them in
// this node's LMDB (embedded mode): the description under [account, 'meta', id] (listed without
// reading any image) and the bytes under [account, 'data', id]. Cluster mode keeps them in the
// cluster's JetStream (cluster-media-store.ts). An id is never reused and its bytes never change, so
// the public URL may be cached for good.

import { createHash, randomBytes } from 'node:crypto'
import { ApiError } from '../errors.js'
import type { Clock } from '../clock.js'
import type { Store } from '../store/store.js'
import { sniffImage, type MediaType } from './signature.js'

/** Images per account by default (BEACON_MEDIA_PER_ACCOUNT_MAX): the panel lists them whole; the store holds them all. */
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

export interface MediaMeta extends Omit<Media, 'url'> {
  etag: string
}

/** An image as served: its bytes, stored type and strong ETag (what the HTTP layer's serveFile takes). */
export interface MediaFile {
  body: Buffer
  contentType: MediaType
  etag: string
}

export interface MediaStore {
  /** Stores the image (415 when it is none, 409 past the account's limit); resolves once it is durable. */
  upload (account: string, name: string, bytes: Buffer): Promise<Media>
  list (account: string): Media[] | Promise<Media[]>
  /** 404 media_not_found when there is no such image. */
  remove (account: string, id: string): Promise<void>
  /** The image as a file to serve, or null. */
  file (account: string, id: string): MediaFile | null | Promise<MediaFile | null>
}

export class LocalMediaStore implements MediaStore {
  private readonly store: Store
  private readonly clock: Clock
  private readonly perAccountMax: number

  constructor (store: Store, clock: Clock, perAccountMax = MEDIA_PER_ACCOUNT_MAX) {
    this.store = store
    this.clock = clock
    this.perAccountMax = perAccountMax
  }

  async upload (account: string, name: string, bytes: Buffer): Promise<Media> {
    const type = imageType(bytes)
    checkLimit(this.count(account), this.perAccountMax)
    const meta = describe(name, type, bytes, this.clock)
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

/** The upload's type, decided by its bytes; 415 when it is not an image accepted here. */
export function imageType (bytes: Buffer): MediaType {
  const type = sniffImage(bytes)
  if (type === null) throw new ApiError('media_type_unsupported')
  return type
}

/** 409 when the account holds its limit of images already. */
export function checkLimit (count: number, perAccountMax: number): void {
  if (count >= perAccountMax) throw new ApiError('conflict', `An account has at most ${perAccountMax} media; delete some first.`)
}

/** A new image's description: a fresh id (never reused), its strong ETag from the bytes. */
export function describe (name: string, type: MediaType, bytes: Buffer, clock: Clock): MediaMeta {
  return {
    id: randomBytes(12).toString('base64url'),
    name,
    type,
    bytes: bytes.length,
    createdAt: new Date(clock.nowMs()).toISOString(),
    etag: `"${createHash('sha256').update(bytes).digest('base64url').slice(0, 27)}"`,
  }
}

export function withUrl (account: string, meta: MediaMeta): Media {
  const { etag: _etag, ...rest } = meta
  return { ...rest, url: `/media/${account}/${meta.id}` }
}
