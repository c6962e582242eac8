// Limits of the native destinations, each named with its unit last.

export const DESTINATION_LIMITS = {
  /** Sockets per provider origin. */
  connectionsPerOrigin: 16,
  /** Answers are read up to this size (a partial-failure answer names the items); the rest is dropped. */
  answerSizeMaxBytes: 262_144,
  /** A batch waits at most this long for more items (due times are rounded up to it): the "short max wait". */
  batchWindowMs: 1000,
  /** Exchanges each destination keeps for its delivery log (in memory, newest last). */
  exchangesKept: 50,
  /** What the log keeps of a request or an answer. */
  exchangeExcerptLengthMax: 4000,
  timeoutMsDefault: 10_000,
  attemptsDefault: 8,
  namesMax: 100,
  credentialLengthMax: 4096,
  settingLengthMax: 2048,
  userAgent: 'Beacon-Destinations/1',
} as const
