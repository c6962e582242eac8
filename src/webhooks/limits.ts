// Every limit of the webhook library in one place, each a named constant with its unit last.
// Configuration limits bound what an admin can save; delivery limits bound what one process holds.

/** Limits on a saved webhook configuration (enforced by validateWebhook). */
export const CONFIG_LIMITS = {
  nameLengthMax: 200,
  namesMax: 100, // events or segments of one trigger
  urlLengthMax: 2048,
  headersMax: 50,
  headerNameLengthMax: 256,
  headerValueLengthMax: 4096,
  payloadLengthMax: 16_384,
  placeholdersMax: 200, // per template
  usernameLengthMax: 256,
  passwordLengthMax: 1024,
  tokenLengthMax: 4096,
  secretLengthMax: 256, // "whsec_" + base64 of 24..64 bytes fits easily
  secretSizeMinBytes: 24, // the Standard Webhooks spec asks for 24 to 64 random bytes
  secretSizeMaxBytes: 64,
  cronLengthMax: 128,
  timeoutMinMs: 100,
  timeoutMaxMs: 60_000,
  batchSizeMax: 1000,
  attemptsMax: 50,
  attemptsDefault: 8,
  rateMinPerSecond: 1,
  rateMaxPerSecond: 100_000,
  delayMaxMs: 86_400_000,
  scheduleIntervalMinMs: 10_000,
  scheduleIntervalMaxMs: 31 * 86_400_000,
} as const

/** Limits of the delivery machinery (sender, worker). */
export const DELIVERY_LIMITS = {
  /** Requests one worker (one webhook) has in flight at once. */
  inflightMaxDefault: 4,
  inflightMaxMax: 64,
  /** Items one worker holds (waiting for their delay, the rate, a free slot or an in-memory retry). */
  queueItemsMaxDefault: 10_000,
  /** A Retry-After larger than this is capped: a receiver cannot park a delivery for days. */
  retryAfterMaxMs: 3_600_000,
  /** Attempt records keep at most this much of an error or response body. */
  errorExcerptLengthMax: 500,
  /** Response bodies are read and discarded up to this size so the socket can be reused; larger ones close it. */
  responseDrainMaxBytes: 65_536,
  /** Sockets per origin in the shared pool (shared by every webhook that targets the origin). */
  connectionsPerOriginDefault: 32,
  /** ProxyAgents kept (one per distinct proxy URL); the least recently used is closed beyond this. */
  proxyAgentsMax: 100,
} as const
