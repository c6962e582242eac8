// How the catalogs (and the panel users) write their configuration in cluster mode
// (src/catalog/replicated-config.ts implements it):
// instead of writing their rows to the local LMDB and updating memory themselves, they hand the rows
// of one change to the writer, which stores them in the cluster's replicated bucket; every node, the
// writer included, then applies them from the bucket's watch (Catalogs.apply). Embedded mode has no
// writer: the catalogs write as they always did.

/** A key of the config db: [account, kind, name], or [account, kind] for a row of the kind as a whole. */
export type ConfigKey = [string, string, string?]

/**
 * A configuration row as the local store keeps it: the accounts db (key: id), the tokens db (key: id),
 * the config db, or the panel users db (key: id; src/users/users.ts).
 */
export type ConfigRow = { db: 'accounts', key: string } | { db: 'tokens', key: string } | { db: 'config', key: ConfigKey } | { db: 'users', key: string }

/** One row of a change: its new stored value (secrets sealed, as in the store), or null to delete it. */
export interface RowWrite {
  row: ConfigRow
  value: unknown
}

export interface ConfigWriter {
  /**
   * One change of `scope` (an account id; '' for the installation: creating accounts; USERS_SCOPE for
   * the panel users, whose emails are unique across accounts). `decide` runs
   * while this node holds the scope's cluster-wide lock and has applied every change acknowledged
   * before it: it checks (limits, existence) against the catalogs in memory and answers the rows to
   * write (it may throw an ApiError). Resolves once the rows are in the replicated bucket (a quorum)
   * and applied on this node, so the change is in memory here when it resolves.
   */
  change (scope: string, decide: () => RowWrite[]): Promise<void>
  /** Deletes rows without the lock: those of an account already deleted (nothing else writes them). */
  removeAll (rows: readonly ConfigRow[]): Promise<void>
}

/** The scope of every change of panel users (not an account id: those are UUIDs). */
export const USERS_SCOPE = 'users'

/** What the replicated configuration writes for and applies to (the catalogs, the panel users). */
export interface Replicated {
  /** From here on, changes are written through `writer` and come back through `apply`. */
  replicate (writer: ConfigWriter): void
  /** A row changed in the replicated configuration (null: deleted) and was written to the local store. */
  apply (row: ConfigRow, value: unknown): void
}
