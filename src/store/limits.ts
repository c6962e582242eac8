// How much one installation and one account may hold: every stored list is bounded, so no tenant can
// make a listing, a compile or a start-up load unbounded. One place for all of them (docs/retries-and-limits.md, "Limits").

/** Accounts in one installation. */
export const ACCOUNTS_MAX = 10_000
/** Tokens of one account that are not revoked (revoked ones are kept, and listed, but not counted). */
export const TOKENS_MAX = 1_000
/** Attribute names one token may list. */
export const TOKEN_ATTRIBUTES_MAX = 1_000
/** Custom event types of one account (the built-in ones are not counted). */
export const EVENT_TYPES_MAX = 1_000
/** Campaigns per account: the compiled set and each visitor's caps grow with it. */
export const CAMPAIGNS_MAX = 10_000
/** Segments per account: each computed one is evaluated after every change of every entity. */
export const SEGMENT_DEFS_MAX = 1_000
/** Webhooks per account. */
export const WEBHOOKS_MAX = 100
/** Native destinations of one account. */
export const DESTINATIONS_MAX = 100

/** Admin listings come a page at a time: this many items unless `?limit=` says otherwise, at most the max. */
export const PAGE_LIMIT_DEFAULT = 100
export const PAGE_LIMIT_MAX = 500
