// Named blobs in a replicated JetStream Object Store bucket (`@nats-io/obj`): the store cuts each object
// into chunks (128 KiB: an object may be larger than NATS's max_payload) and writes its description (a
// "meta" message under `$O.<bucket>.M.<name>`, rolled up to the last one per name) once every chunk is
// stored, so a put acknowledged is on a quorum with R3. A delete writes a meta message marked deleted
// and purges the chunks. Each description carries string metadata chosen by the caller.
//
// Watching: an ordered push consumer on the meta subjects, from the last description of each name
// (deleted ones included), then every new one in order, each with its stream sequence (the revision).
// `lastRevision` asks the stream's leader for the last description's sequence: a watcher that has seen
// it has seen every put and delete acknowledged before the call (checked on nats-server 2.9.10: a
// wildcard `last_by_subj` is answered).

import type { NatsConnection } from '@nats-io/transport-node'
import { DeliverPolicy, jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream'
import { Objm, type ObjectStore } from '@nats-io/obj'
import { positiveInteger } from './errors.js'
import { retryWhileElecting } from './retry.js'
import { readyAt } from './applied-revision.js'

export interface ObjectEntry {
  name: string
  metadata: Record<string, string>
  /** Bytes of the object (0 once deleted). */
  size: number
  deleted: boolean
  /** The stream sequence of this description: increasing, in the order of the writes. */
  revision: number
}

export interface ObjectBucketOptions {
  nc: NatsConnection
  /** The bucket's name, e.g. `BEACON_MEDIA_<cluster>` (its stream is `OBJ_<bucket>`). */
  bucket: string
  replicas: number
}

export interface ObjectWatchHandlers {
  /** Each name's last description, then each new one, one at a time, in order. */
  onChange: (entry: ObjectEntry) => void
  /** Once every description that existed when the watch started was delivered (at once when there were none). */
  onReady?: () => void
}

export class ObjectBucket {
  private readonly stream: string
  private readonly metaSubjects: string

  private constructor (private readonly os: ObjectStore, private readonly js: JetStreamClient, private readonly jsm: JetStreamManager, bucket: string) {
    this.stream = `OBJ_${bucket}`
    this.metaSubjects = `$O.${bucket}.M.>`
  }

  static async open ({ nc, bucket, replicas }: ObjectBucketOptions): Promise<ObjectBucket> {
    positiveInteger('replicas', replicas)
    const os = await retryWhileElecting(() => new Objm(nc).create(bucket, { replicas }))
    return new ObjectBucket(os, jetstream(nc), await retryWhileElecting(() => jetstreamManager(nc)), bucket)
  }

  /** Stores the object; resolves with its description's revision once every chunk and the description are stored. */
  async put (name: string, metadata: Record<string, string>, bytes: Uint8Array): Promise<number> {
    return (await this.os.putBlob({ name, metadata }, bytes)).revision
  }

  /** The object's bytes, or null when there is none of that name (or it was deleted). */
  get (name: string): Promise<Uint8Array | null> {
    return this.os.getBlob(name)
  }

  /** Marks the object deleted (watchers see it) and drops its chunks; nothing when there is none. */
  async delete (name: string): Promise<void> {
    await this.os.delete(name)
  }

  /** The last description's revision (0 when none was ever written), as the stream's leader answers it. */
  async lastRevision (): Promise<number> {
    const message = await this.jsm.streams.getMessage(this.stream, { last_by_subj: this.metaSubjects })
    return message?.seq ?? 0
  }

  /** Each name's last description, then every new one. stop() ends the watch. */
  async watch (handlers: ObjectWatchHandlers): Promise<{ stop (): void }> {
    const delivered = readyAt(await this.lastRevision(), handlers.onReady)
    const consumer = await this.js.consumers.getPushConsumer(this.stream, { filter_subjects: this.metaSubjects, deliver_policy: DeliverPolicy.LastPerSubject })
    const messages = await consumer.consume({
      callback: message => {
        const info = message.json<{ name: string, metadata?: Record<string, string>, size?: number, deleted?: boolean }>()
        handlers.onChange({ name: info.name, metadata: info.metadata ?? {}, size: info.size ?? 0, deleted: info.deleted === true, revision: message.seq })
        delivered(message.seq)
      },
    })
    return { stop: () => { messages.stop() } }
  }
}
