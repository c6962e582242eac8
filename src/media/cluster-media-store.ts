// Cluster mode's media: every image in one replicated JetStream Object Store bucket
// (`BEACON_MEDIA_<cluster>`, src/cluster/object-bucket.ts), named `<account>/<id>`, its description
// (name, type, bytes, createdAt, etag) in the object's metadata. An upload is answered once its bytes and
// description are stored (on a quorum with R3). Every node watches the bucket's descriptions and keeps
// them in memory, so any node lists, serves and deletes every image without reading bytes; a deletion
// made through any node reaches every node's view in milliseconds (the watch), and the image is 404
// there from then on. Bytes are fetched from the bucket on a node's first read of an image and kept in
// its LMDB (`[account, 'data', id]`, as embedded mode keeps them): an id is never reused and its bytes
// never change, so the copy never goes stale; it is dropped when the deletion is seen.
//
// The per-account limit is exact across the cluster: an account's uploads are serialised by a lock in
// the KV bucket `BEACON_MEDIA_LOCKS_<cluster>` (src/cluster/leases.ts; it lapses after MEDIA_LOCK_MS if
// its holder dies), whose holder first catches up with the bucket (applies every description up to
// its last revision) and counts the account's images then.

import { ApiError } from '../errors.js'
import { log } from '../log.js'
import type { Clock } from '../clock.js'
import type { Store } from '../store/store.js'
import type { ObjectBucket, ObjectEntry } from '../cluster/object-bucket.js'
import type { Lease, LeaseTable } from '../cluster/leases.js'
import { partitionOf } from '../cluster/partition.js'
import { retryWhileElecting } from '../cluster/retry.js'
import { AppliedRevision } from '../cluster/applied-revision.js'
import type { MediaType } from './signature.js'
import { checkLimit, describe, imageType, MEDIA_PER_ACCOUNT_MAX, withUrl, type Media, type MediaFile, type MediaMeta, type MediaStore } from './media-store.js'

/** How long an account's upload lock lasts if its holder never gives it back (it died): the lock bucket's TTL. */
export const MEDIA_LOCK_MS = 10_000
/** How long an upload waits for its account's lock before 503 unavailable. */
const LOCK_WAIT_MS = 5_000
/** How long a node waits for its watch to reach the bucket's last revision before 503 unavailable. */
const CATCH_UP_WAIT_MS = 5_000
/** Accounts share this many lock keys (by hash): enough that two accounts rarely wait for each other. */
const LOCK_SLOTS = 4096
/** What describe() makes an id: 12 random bytes, base64url. Others are not looked up in the bucket. */
const ID_PATTERN = /^[A-Za-z0-9_-]{16}$/

export interface ClusterMediaStoreOptions {
  bucket: ObjectBucket
  locks: LeaseTable
  store: Store
  clock: Clock
  /** BEACON_MEDIA_PER_ACCOUNT_MAX. */
  perAccountMax?: number
}

export class ClusterMediaStore implements MediaStore {
  private readonly bucket: ObjectBucket
  private readonly locks: LeaseTable
  private readonly store: Store
  private readonly clock: Clock
  private readonly perAccountMax: number
  /** Every live image's description, by account then id, as the watch told it. */
  private readonly byAccount = new Map<string, Map<string, MediaMeta>>()
  /** The highest revision of the bucket applied here. */
  private readonly applied = new AppliedRevision({
    waitMs: CATCH_UP_WAIT_MS,
    timedOut: (revision, waitMs) => unavailable(`revision ${revision} of the media bucket was not seen here within ${waitMs} ms`),
    onTimeout: () => this.restartWatch(),
  })

  /** First reads of an image under way (one fetch from the bucket however many ask). */
  private readonly fetching = new Map<string, Promise<Buffer | null>>()
  /** Until the first catch-up: ids the bucket holds deleted (an embedded data folder's images are not moved in again). */
  private deletedSeen: Set<string> | null = new Set()
  private watch: { stop (): void } | null = null
  /** When the watch was last started again (at most once per CATCH_UP_WAIT_MS, however many waits time out). */
  private restartedAtMs = -Infinity
  private closed = false

  constructor ({ bucket, locks, store, clock, perAccountMax = MEDIA_PER_ACCOUNT_MAX }: ClusterMediaStoreOptions) {
    this.bucket = bucket
    this.locks = locks
    this.store = store
    this.clock = clock
    this.perAccountMax = perAccountMax
  }

  /**
   * Watches the bucket; resolves once every description it held is applied here. Then the local
   * copies of images the bucket does not hold are dropped, and images of an embedded data folder
   * (descriptions in LMDB) are moved into the bucket.
   */
  async start (): Promise<void> {
    let caughtUp!: () => void
    const ready = new Promise<void>(resolve => { caughtUp = resolve })
    this.watch = await this.bucket.watch({ onChange: entry => this.apply(entry), onReady: () => caughtUp() })
    await ready
    this.dropStaleCopies()
    await this.moveLocalImagesIn()
    this.deletedSeen = null
  }

  async upload (account: string, name: string, bytes: Buffer): Promise<Media> {
    const type = imageType(bytes)
    const lease = await viaNats('taking the account\'s media lock', this.lock(account))
    try {
      // Every upload and deletion acknowledged before the lock was taken is counted.
      await this.catchUp()
      checkLimit(this.byAccount.get(account)?.size ?? 0, this.perAccountMax)
      const meta = describe(name, type, bytes, this.clock)
      const revision = await viaNats('storing the image', this.bucket.put(objectName(account, meta.id), metadataOf(account, meta), bytes))
      this.store.ignoreFailure(this.store.media.put([account, 'data', meta.id], bytes))
      await this.applied.wait(revision)
      return withUrl(account, meta)
    } finally {
      this.locks.release(lease).catch((error: unknown) => log.warn({ err: error, account }, 'a media lock was not given back; it lapses by itself'))
    }
  }

  /** After catching up with the bucket; when NATS does not answer, this node's view as it is. */
  async list (account: string): Promise<Media[]> {
    await this.catchUp().catch((error: unknown) => log.warn({ err: error, account }, 'media listed without catching up with the cluster'))
    return [...this.byAccount.get(account)?.values() ?? []].map(meta => withUrl(account, meta))
  }

  async remove (account: string, id: string): Promise<void> {
    if (this.known(account, id) === undefined) await this.catchUp()
    if (this.known(account, id) === undefined) throw new ApiError('media_not_found')
    await viaNats('deleting the image', this.bucket.delete(objectName(account, id)))
    // The deletion applied here: 404 through this node from the answer on.
    await this.catchUp()
  }

  async file (account: string, id: string): Promise<MediaFile | null> {
    let meta = this.known(account, id)
    if (meta === undefined && ID_PATTERN.test(id)) {
      // Maybe uploaded through another node a moment ago, not yet seen here.
      await this.catchUp().catch(() => {})
      meta = this.known(account, id)
    }
    if (meta === undefined) return null
    const body = (this.store.media.get([account, 'data', id]) as Buffer | undefined) ?? await this.fetch(account, id)
    return body === null ? null : { body, contentType: meta.type, etag: meta.etag }
  }

  /** Account deletion: every image of the account deleted from the bucket (under its lock); how many. */
  async removeAccount (account: string): Promise<number> {
    return retryWhileElecting(async () => {
      const lease = await this.lock(account)
      try {
        await this.catchUp()
        const ids = [...this.byAccount.get(account)?.keys() ?? []]
        for (const id of ids) await this.bucket.delete(objectName(account, id))
        return ids.length
      } finally {
        await this.locks.release(lease).catch(() => {})
      }
    })
  }

  close (): void {
    this.closed = true
    this.watch?.stop()
    this.applied.close(unavailable('this node is stopping'))
  }

  private known (account: string, id: string): MediaMeta | undefined {
    return this.byAccount.get(account)?.get(id)
  }

  /** The image's bytes from the bucket, kept in LMDB; null when the bucket has none (deleted meanwhile). */
  private fetch (account: string, id: string): Promise<Buffer | null> {
    const name = objectName(account, id)
    let fetching = this.fetching.get(name)
    if (fetching === undefined) {
      fetching = viaNats('reading the image', this.bucket.get(name)).then(bytes => {
        if (bytes === null) return null
        const body = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
        if (this.known(account, id) !== undefined) this.store.ignoreFailure(this.store.media.put([account, 'data', id], body))
        return body
      }).finally(() => this.fetching.delete(name))
      this.fetching.set(name, fetching)
    }
    return fetching
  }

  private async lock (account: string): Promise<Lease> {
    const lease = await this.locks.acquireWithin(partitionOf(account, 'media', LOCK_SLOTS), LOCK_WAIT_MS)
    if (lease === null) throw unavailable('another node holds the account\'s media lock')
    return lease
  }

  /** Resolves once every description the bucket held when called is applied here. */
  private async catchUp (): Promise<void> {
    await this.applied.wait(await viaNats('reading the last revision', this.bucket.lastRevision()))
  }

  /** The watch fell silent (its server went, say): a new one, from each image's last description again. */
  private restartWatch (): void {
    if (this.closed || performance.now() - this.restartedAtMs < CATCH_UP_WAIT_MS) return
    this.restartedAtMs = performance.now()
    this.watch?.stop()
    this.bucket.watch({ onChange: entry => this.apply(entry) }).then(watch => {
      if (this.closed) watch.stop()
      else this.watch = watch
    }, (error: unknown) => log.warn({ err: error }, 'the media bucket\'s watch could not be started again'))
  }

  private apply (entry: ObjectEntry): void {
    const { account, id } = entry.metadata
    if (account !== undefined && id !== undefined) {
      if (entry.deleted) {
        this.byAccount.get(account)?.delete(id)
        this.store.ignoreFailure(this.store.media.remove([account, 'data', id]))
        this.deletedSeen?.add(id)
      } else {
        let images = this.byAccount.get(account)
        if (images === undefined) this.byAccount.set(account, images = new Map())
        images.set(id, metaOf(entry.metadata, id))
      }
    }
    this.applied.advance(entry.revision)
  }

  /** Copies of images the bucket no longer holds (deleted while this node was away). */
  private dropStaleCopies (): void {
    for (const key of this.store.media.getKeys()) {
      const [account, kind, id] = key as [string, string, string]
      if (kind === 'data' && this.known(account, id) === undefined && this.store.media.get([account, 'meta', id]) === undefined) {
        this.store.ignoreFailure(this.store.media.remove(key))
      }
    }
  }

  /** An embedded data folder's images (descriptions in LMDB) go into the bucket, unless it holds them deleted. */
  private async moveLocalImagesIn (): Promise<void> {
    let moved = 0
    for (const { key, value } of this.store.media.getRange()) {
      const [account, kind, id] = key as [string, string, string]
      if (kind !== 'meta') continue
      const bytes = this.store.media.get([account, 'data', id]) as Buffer | undefined
      if (this.known(account, id) === undefined && this.deletedSeen?.has(id) !== true && bytes !== undefined) {
        await retryWhileElecting(() => this.bucket.put(objectName(account, id), metadataOf(account, value as MediaMeta), bytes))
        moved++
      }
      await this.store.durable(this.store.media.remove(key))
    }
    if (moved > 0) log.info({ moved }, 'images of this node\'s data folder were put into the cluster\'s media bucket')
  }
}

function objectName (account: string, id: string): string {
  return `${account}/${id}`
}

function metadataOf (account: string, meta: MediaMeta): Record<string, string> {
  return { account, id: meta.id, name: meta.name, type: meta.type, bytes: String(meta.bytes), createdAt: meta.createdAt, etag: meta.etag }
}

function metaOf (metadata: Record<string, string>, id: string): MediaMeta {
  return {
    id, name: metadata.name ?? '', type: metadata.type as MediaType, bytes: Number(metadata.bytes), createdAt: metadata.createdAt ?? '', etag: metadata.etag ?? '',
  }
}

/** A NATS failure (no responders, a timeout during an election) answers 503 unavailable, never 500. */
async function viaNats<T> (what: string, step: Promise<T>): Promise<T> {
  try {
    return await step
  } catch (error) {
    if (error instanceof ApiError) throw error
    log.warn({ err: error }, `media: NATS failed while ${what}`)
    throw unavailable(`NATS failed while ${what}`)
  }
}

function unavailable (why: string): ApiError {
  return new ApiError('unavailable', `The cluster's media cannot be reached right now (${why}); retry shortly.`, undefined, { 'Retry-After': '1' })
}
