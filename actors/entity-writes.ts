// How a visitor or profile actor makes its state durable. Embedded mode (no such object given to the
// kinds): the actor puts its row and waits for the store's durability setting, as it always did. Cluster
// mode: the entity log (entity-log.ts) appends the write to its partition's replicated changelog.

import type { IdempotentWrite } from './idempotent.js'

export type EntityKindName = 'visitor' | 'profile'

export interface EntityWrites {
  /**
   * Put the entity's state (null: delete it), with the outbox rows the actor appended in this event
   * turn (store.appendOutbox, called before this in the same turn). Issued synchronously; resolves once
   * the write is durable, rejects (ApiError) when it is not. `idem`: the Idempotency-Key record the
   * actor put with it (store.idempotency, same event turn), which must be as durable as the state.
   */
  write (kind: EntityKindName, account: string, id: string, state: object | null, idem?: IdempotentWrite | null): Promise<void>
  /**
   * Instead of write, for an actor whose state may be stale (evicted while it ran: its partition was
   * lost, and may have been recovered since with other writes): the outbox rows of this event turn are
   * taken back, and it rejects with 503 `partition_moved` (the request is sent again to the owner).
   */
  refuse (account: string, id: string): Promise<void>
}
