// How the catalogs write their configuration in cluster mode (replicated-config.ts implements it):
// instead of writing their rows to the local LMDB and updating memory themselves, they hand the rows
// of one change to the writer, which stores them in the cluster's replicated bucket; every node, the
// writer included, then applies them from the bucket's watch (Catalogs.apply). Embedded mode has no
// writer: the catalogs write as they always did.

/** A key of the config db: [account, kind, name], or [account, kind] for a row of the kind as a whole. */
export type ConfigKey = [string, string, string?]

/** A configuration row as the local store keeps it: the accounts db (key: id), the tokens db (key: id) or the config db. */
export type ConfigRow = { db: 'accounts', key: string } | { db: 'tokens', key: string } | { db: 'config', key: ConfigKey }

/** One row of a change: its new stored value (secrets sealed, as in the store), or null to delete it. */
export interface RowWrite {
  row: ConfigRow
  value: unknown
}

export interface ConfigWriter {
  /**
   * One change of `scope` (an account id; '' for the installation: creating accounts). `decide` runs
   * while this node holds the scope's cluster-wide lock and has applied every change acknowledged
   * before it: it checks (limits, existence) against the catalogs in memory and answers the rows to
   * write (it may throw an ApiError). Resolves once the rows are in the replicated bucket (a quorum)
   * and applied on this node, so the change is in memory here when it resolves.
   */
  change (scope: string, decide: () => RowWrite[]): Promise<void>
  /** Deletes rows without the lock: those of an account already deleted (nothing else writes them). */
  removeAll (rows: readonly ConfigRow[]): Promise<void>
}
