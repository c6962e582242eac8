// Configuration from BEACON_* environment variables, checked once at start: every bad value gets
// its own line, and the process refuses to start rather than run with a guess.

import { isIP } from 'node:net'
import { accessSync, constants } from 'node:fs'
import { parseKeys } from './auth/secret-keys.js'

export const DURABILITY = ['flushed', 'committed'] as const
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const
export type Durability = typeof DURABILITY[number]

export interface Config {
  host: string
  port: number
  dataDir: string
  adminKey: string | null
  bodySizeMaxBytes: number
  durability: Durability
  actorsMax: number
  actorIdleMs: number
  mailboxMax: number
  inflightMax: number
  /** BEACON_ACCOUNT_INFLIGHT_MAX: public requests of one account in flight at once (default: half of inflightMax). */
  accountInflightMax: number
  /** BEACON_ACCOUNT_RATE_PER_SECOND (0: unlimited) and BEACON_ACCOUNT_RATE_BURST: accounts' default rate on the public endpoints. */
  accountRatePerSecond: number
  accountRateBurst: number
  mapSizeBytes: number
  segmentSweepMs: number
  /** BEACON_DELIVERY_RETENTION_MS: delivered webhook delivery records older than this are deleted; 0 keeps them. */
  deliveryRetentionMs: number
  /**
   * BEACON_VISITOR_RETENTION_DAYS: an anonymous visitor (linked to no profile) inactive this long is
   * erased, with its outbox rows and delivery records (src/jobs/visitor-retention.ts); 0 keeps them.
   * Held here in milliseconds.
   */
  visitorRetentionMs: number
  /** BEACON_VISITOR_RETENTION_SWEEP_MS: how often the visitors are swept for inactive ones (with a retention set). */
  visitorRetentionSweepMs: number
  /** BEACON_EVENT_RETENTION_DAYS: how long the retained event log keeps an event (docs/event-log.md; cluster mode: its stream's MaxAge); 0: no log kept. */
  eventRetentionDays: number
  /** BEACON_EVENT_LOG_MAX_BYTES: past this size the log's oldest events go first (0: no cap but the map size; cluster mode: its stream's MaxBytes). */
  eventLogMaxBytes: number
  /** BEACON_REPLAY_INFLIGHT_MAX: a replay's deliveries not settled at once (src/jobs/replay.ts). */
  replayInflightMax: number
  /** BEACON_BACKFILL_SETTLE_MS: a segment backfill's walk reads the log at least this long (src/jobs/segment-backfill.ts). */
  backfillSettleMs: number
  /** BEACON_IMPORT_MAX_BYTES: the largest NDJSON body POST …/imports takes. */
  importMaxBytes: number
  /** BEACON_IMPORTS_RUNNING_MAX: imports applied at once (the others wait, queued). */
  importsRunningMax: number
  webhookAllowPrivate: boolean
  /** BEACON_TRUSTED_PROXIES: addresses of the proxies in front of Beacon whose X-Forwarded-For is believed (src/http/client-address.ts). */
  trustedProxies: string[]
  /** BEACON_METRICS: whether requests and internals are counted for GET /metrics. */
  metrics: boolean
  /** BEACON_METRICS_TOKEN: when set, GET /metrics needs `Authorization: Bearer <token>`. */
  metricsToken: string | null
  /** BEACON_REQUEST_LOG_SAMPLE: the share of requests logged, 0 (none) to 1 (all). */
  requestLogSample: number
  /** BEACON_NATS_URL: NATS server URL(s), comma-separated, or null for the embedded mode. */
  natsUrl: string | null
  /** How Beacon authenticates to NATS and checks its servers (BEACON_NATS_USER … BEACON_NATS_TLS_KEY): never logged. */
  natsAuth: NatsAuth
  /** BEACON_NATS_MAX_ACK_PENDING: messages the main JetStream delivery consumer hands out unacked, over every node. */
  natsAckPendingMax: number
  /** BEACON_NATS_ACK_WAIT_MS: a record handed out to a node that stopped heartbeating (crashed) is handed out again after this. */
  natsAckWaitMs: number
  /** BEACON_SECRETS_KEY: base64 32-byte keys, comma-separated, the first sealing; null: <data>/secrets.key. */
  secretsKey: string | null
  /** BEACON_SESSION_TTL_MS: a panel session ends this long after sign-in (absolute; sign-out ends it sooner). */
  sessionTtlMs: number
  /** BEACON_MEDIA_MAX_BYTES: the largest media upload (raw-body routes have this limit instead of bodySizeMaxBytes). */
  mediaSizeMaxBytes: number
  /** BEACON_MEDIA_PER_ACCOUNT_MAX: images an account may hold (exact across a cluster). */
  mediaPerAccountMax: number
  /** BEACON_REPORT_FOLD_MS: how often the report counters kept in memory are folded into the store. */
  reportFoldMs: number
  /** BEACON_BANDIT_INTERVAL_MS: how often bandit experiments are reweighted from their conversions. */
  banditIntervalMs: number
  /** BEACON_REPORTS: whether events, segment changes and deliveries are counted for reports and member counts. */
  reports: boolean
  /** BEACON_CLUSTER: the cluster's name; null: embedded (one process owns every key). */
  cluster: string | null
  /** BEACON_NODE_ID: this node's id in the cluster; null: the data folder's node id. */
  nodeId: string | null
  /** BEACON_PUBLIC_URL: the base URL clients reach this node at (the route map); null: http://<host>:<port>. */
  publicUrl: string | null
  /** BEACON_PARTITIONS: partitions of the key space, fixed when the cluster is first created. */
  partitions: number
  /** BEACON_REPLICAS: JetStream replicas of the cluster's streams and buckets. */
  replicas: number
  /** BEACON_LEASE_MS: how long a silent node keeps its partitions before others take them. */
  leaseMs: number
  /**
   * BEACON_NATS_ANY_VERSION: start on a nats-server older than the minimum (with a warning) instead of
   * refusing. For benchmarks comparing releases only: such a server can lose acknowledged writes.
   */
  natsAnyVersion: boolean
  /** BEACON_CLUSTER_RESIGN: accept the unsigned configuration records present at start and write them back signed (the upgrade). */
  clusterResign: boolean  /** BEACON_CHANGELOG_STREAMS: the changelog streams a new cluster spreads its partitions over (its record wins after). */
  changelogStreams: number
  /** BEACON_FORWARD_BATCH: send requests forwarded to an owner node in batches (src/cluster/forward-batch.ts); false: one request/reply each. */
  forwardBatch: boolean
}

/** NATS credentials and TLS files (docs/cluster-security.md). Files are read when connecting. */
export interface NatsAuth {
  /** BEACON_NATS_USER and BEACON_NATS_PASSWORD (both or neither). */
  user: string | null
  password: string | null
  /** BEACON_NATS_CREDS: a credentials file (user JWT and nkey seed, `nsc generate creds`). */
  credsFile: string | null
  /** BEACON_NATS_NKEY: a file holding an nkey seed (SU…). */
  nkeyFile: string | null
  /** BEACON_NATS_TLS_CA: the CA bundle that signed the servers' certificates (tls:// or a server requiring TLS). */
  tlsCaFile: string | null
  /** BEACON_NATS_TLS_CERT and BEACON_NATS_TLS_KEY: a client certificate (servers with `verify: true`). */
  tlsCertFile: string | null
  tlsKeyFile: string | null
}

/** What may be logged of the NATS access: which kind, never a credential. */
export function describeNatsAuth (auth: NatsAuth): { credentials: 'user' | 'creds' | 'nkey' | 'url or none', tls: boolean } {
  const credentials = auth.user !== null ? 'user' : auth.credsFile !== null ? 'creds' : auth.nkeyFile !== null ? 'nkey' : 'url or none'
  return { credentials, tls: auth.tlsCaFile !== null || auth.tlsCertFile !== null }
}

export class ConfigError extends Error {
  readonly problems: string[]
  constructor (problems: string[]) {
    super('invalid configuration:\n' + problems.map(p => '  ' + p).join('\n'))
    this.problems = problems
  }
}

type Env = Record<string, string | undefined>

function integer (env: Env, name: string, fallback: number, min: number, max: number, problems: string[]): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  const n = Number(raw)
  if (!Number.isInteger(n) || n < min || n > max) {
    problems.push(`${name}=${JSON.stringify(raw)}: expected a whole number from ${min} to ${max}`)
    return fallback
  }
  return n
}

function boolean (env: Env, name: string, fallback: boolean, problems: string[]): boolean {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  if (raw === 'true') return true
  if (raw === 'false') return false
  problems.push(`${name}=${JSON.stringify(raw)}: expected true or false`)
  return fallback
}

function fraction (env: Env, name: string, fallback: number, problems: string[]): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  const n = Number(raw)
  if (!Number.isFinite(n) || n < 0 || n > 1 || raw.trim() === '') {
    problems.push(`${name}=${JSON.stringify(raw)}: expected a number from 0 to 1`)
    return fallback
  }
  return n
}

/** A number of days, decimals allowed (0.5: 12 hours), from 0 to `max`: milliseconds. */
function days (env: Env, name: string, max: number, problems: string[]): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return 0
  const n = Number(raw)
  if (raw.trim() === '' || !Number.isFinite(n) || n < 0 || n > max) {
    problems.push(`${name}=${JSON.stringify(raw)}: expected a number of days from 0 to ${max} (decimals allowed; 0: kept)`)
    return 0
  }
  return Math.round(n * 86_400_000)
}

export const NATS_PROTOCOLS = ['nats:', 'tls:'] as const

/** One or more comma-separated nats:// or tls:// URLs (a cluster's seed servers). */
function natsUrl (env: Env, name: string, problems: string[]): string | null {
  const raw = env[name]
  if (raw === undefined || raw.trim() === '') return null
  for (const part of raw.split(',')) {
    const text = part.trim()
    let url: URL | null = null
    try {
      url = new URL(text)
    } catch {}
    if (url === null || !(NATS_PROTOCOLS as readonly string[]).includes(url.protocol) || url.hostname === '') {
      // The value may carry credentials (nats://user:password@host): never echo it.
      problems.push(`${name}: expected nats://host:port or tls://host:port (several separated by commas); got ${describeUrl(text)}`)
      return null
    }
  }
  return raw.trim()
}

/** URLs as they may be shown: any user name and password replaced. */
export function redactUrl (text: string): string {
  return text.replace(/\/\/[^@/,]*@/g, '//[redacted]@')
}

function describeUrl (text: string): string {
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*:)\/\//.exec(text)
  return scheme === null ? 'no scheme://' : `scheme ${scheme[1]}`
}

/** Letters, digits, - and _: a cluster or node id becomes part of NATS subject, stream and bucket names. */
export const CLUSTER_TOKEN = /^[A-Za-z0-9_-]{1,64}$/

/** A comma-separated list of IP addresses (v4 or v6). */
function addresses (env: Env, name: string, problems: string[]): string[] {
  const raw = env[name]
  if (raw === undefined || raw.trim() === '') return []
  const out: string[] = []
  for (const part of raw.split(',')) {
    const text = part.trim()
    if (isIP(text) === 0) {
      problems.push(`${name}: expected IP addresses separated by commas; ${JSON.stringify(text)} is not one`)
      return []
    }
    out.push(text)
  }
  return out
}

/** BEACON_PUBLIC_URL: an http(s) URL without query or fragment, kept without its trailing slash. */
function publicUrl (env: Env, problems: string[]): string | null {
  const raw = env.BEACON_PUBLIC_URL
  if (raw === undefined || raw.trim() === '') return null
  let url: URL | null = null
  try {
    url = new URL(raw.trim())
  } catch {}
  if (url === null || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '' || url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '') {
    // The value may carry credentials: never echo it.
    problems.push(`BEACON_PUBLIC_URL: expected http://host[:port][/path] or https://… (no query, fragment or credentials); got ${describeUrl(raw.trim())}`)
    return null
  }
  return url.href.replace(/\/+$/, '')
}

function token (env: Env, name: string, problems: string[]): string | null {
  const raw = env[name]
  if (raw === undefined || raw === '') return null
  if (!CLUSTER_TOKEN.test(raw)) {
    problems.push(`${name}=${JSON.stringify(raw)}: expected 1 to 64 letters, digits, - or _`)
    return null
  }
  return raw
}

function secretsKey (env: Env, problems: string[]): string | null {
  const raw = env.BEACON_SECRETS_KEY
  if (raw === undefined || raw.trim() === '') return null
  try {
    parseKeys(raw, 'BEACON_SECRETS_KEY')
  } catch (error) {
    // The message names the entry, never its value.
    problems.push((error as Error).message)
  }
  return raw
}

/** A file Beacon must read (a credential or certificate): its path, checked readable now. */
function readableFile (env: Env, name: string, problems: string[]): string | null {
  const raw = env[name]
  if (raw === undefined || raw === '') return null
  try {
    accessSync(raw, constants.R_OK)
  } catch {
    problems.push(`${name}=${JSON.stringify(raw)}: no readable file there`)
  }
  return raw
}

function natsAuth (env: Env, problems: string[]): NatsAuth {
  const user = env.BEACON_NATS_USER || null
  const password = env.BEACON_NATS_PASSWORD || null
  // Never echo a credential: only the setting's name.
  if ((user === null) !== (password === null)) problems.push(`${user === null ? 'BEACON_NATS_PASSWORD' : 'BEACON_NATS_USER'}: set BEACON_NATS_USER and BEACON_NATS_PASSWORD together`)
  const auth: NatsAuth = {
    user,
    password,
    credsFile: readableFile(env, 'BEACON_NATS_CREDS', problems),
    nkeyFile: readableFile(env, 'BEACON_NATS_NKEY', problems),
    tlsCaFile: readableFile(env, 'BEACON_NATS_TLS_CA', problems),
    tlsCertFile: readableFile(env, 'BEACON_NATS_TLS_CERT', problems),
    tlsKeyFile: readableFile(env, 'BEACON_NATS_TLS_KEY', problems),
  }
  const kinds = [user !== null && 'BEACON_NATS_USER', auth.credsFile !== null && 'BEACON_NATS_CREDS', auth.nkeyFile !== null && 'BEACON_NATS_NKEY'].filter(Boolean)
  if (kinds.length > 1) problems.push(`${kinds.join(', ')}: set one way of authenticating to NATS, not several`)
  if ((auth.tlsCertFile === null) !== (auth.tlsKeyFile === null)) problems.push('BEACON_NATS_TLS_CERT: set BEACON_NATS_TLS_CERT and BEACON_NATS_TLS_KEY together')
  const urls = env.BEACON_NATS_URL ?? ''
  if (kinds.length > 0 && /\/\/[^@/,]+@/.test(urls)) problems.push(`BEACON_NATS_URL: carries credentials and ${kinds[0]} is set too; keep one`)
  if (urls.trim() === '') {
    for (const name of ['BEACON_NATS_USER', 'BEACON_NATS_PASSWORD', 'BEACON_NATS_CREDS', 'BEACON_NATS_NKEY', 'BEACON_NATS_TLS_CA', 'BEACON_NATS_TLS_CERT', 'BEACON_NATS_TLS_KEY']) {
      if (env[name] !== undefined && env[name] !== '') problems.push(`${name}: only applies with BEACON_NATS_URL`)
    }
  }
  return auth
}

export function loadConfig (env: Env = process.env): Config {
  const problems: string[] = []
  const logLevel = env.BEACON_LOG_LEVEL
  if (logLevel !== undefined && logLevel !== '' && !(LOG_LEVELS as readonly string[]).includes(logLevel)) {
    problems.push(`BEACON_LOG_LEVEL=${JSON.stringify(logLevel)}: expected one of ${LOG_LEVELS.join(', ')}`)
  }
  const durabilityRaw = env.BEACON_DURABILITY || 'flushed'
  if (!(DURABILITY as readonly string[]).includes(durabilityRaw)) {
    problems.push(`BEACON_DURABILITY=${JSON.stringify(durabilityRaw)}: expected one of ${DURABILITY.join(', ')}`)
  }
  const adminKey = env.BEACON_ADMIN_KEY || null
  if (adminKey !== null && adminKey.length < 16) {
    problems.push('BEACON_ADMIN_KEY: must be at least 16 characters (or unset, to have one generated)')
  }
  const metricsToken = env.BEACON_METRICS_TOKEN || null
  if (metricsToken !== null && metricsToken.length < 16) {
    problems.push('BEACON_METRICS_TOKEN: must be at least 16 characters (or unset: /metrics without a token)')
  }
  const inflightMax = integer(env, 'BEACON_INFLIGHT_MAX', 10_000, 1, 1_000_000, problems)
  const accountRatePerSecond = integer(env, 'BEACON_ACCOUNT_RATE_PER_SECOND', 0, 0, 1_000_000, problems)
  const config: Config = {
    // Loopback for a bare start: the admin API is not on every interface by default (the image sets 0.0.0.0).
    host: env.BEACON_HOST || '127.0.0.1',
    port: integer(env, 'BEACON_PORT', 8080, 0, 65535, problems),
    dataDir: env.BEACON_DATA_DIR || './data',
    adminKey,
    bodySizeMaxBytes: integer(env, 'BEACON_MAX_BODY_BYTES', 65536, 256, 16 * 1024 * 1024, problems),
    durability: durabilityRaw as Durability,
    actorsMax: integer(env, 'BEACON_ACTORS_MAX', 100_000, 100, 10_000_000, problems),
    actorIdleMs: integer(env, 'BEACON_ACTOR_IDLE_MS', 60_000, 100, 86_400_000, problems),
    mailboxMax: integer(env, 'BEACON_MAILBOX_MAX', 1_000, 1, 100_000, problems),
    inflightMax,
    accountInflightMax: integer(env, 'BEACON_ACCOUNT_INFLIGHT_MAX', Math.max(1, Math.floor(inflightMax / 2)), 1, 1_000_000, problems),
    accountRatePerSecond,
    accountRateBurst: integer(env, 'BEACON_ACCOUNT_RATE_BURST', Math.max(1, accountRatePerSecond), 1, 10_000_000, problems),
    mapSizeBytes: integer(env, 'BEACON_MAP_SIZE_BYTES', 0, 0, Number.MAX_SAFE_INTEGER, problems),
    segmentSweepMs: integer(env, 'BEACON_SEGMENT_SWEEP_MS', 1000, 10, 3_600_000, problems),
    deliveryRetentionMs: integer(env, 'BEACON_DELIVERY_RETENTION_MS', 7 * 86_400_000, 0, 3650 * 86_400_000, problems),
    visitorRetentionMs: days(env, 'BEACON_VISITOR_RETENTION_DAYS', 36_500, problems),
    visitorRetentionSweepMs: integer(env, 'BEACON_VISITOR_RETENTION_SWEEP_MS', 3_600_000, 1000, 86_400_000, problems),
    eventRetentionDays: integer(env, 'BEACON_EVENT_RETENTION_DAYS', 30, 0, 3650, problems),
    eventLogMaxBytes: integer(env, 'BEACON_EVENT_LOG_MAX_BYTES', 0, 0, Number.MAX_SAFE_INTEGER, problems),
    replayInflightMax: integer(env, 'BEACON_REPLAY_INFLIGHT_MAX', 100, 1, 10_000, problems),
    backfillSettleMs: integer(env, 'BEACON_BACKFILL_SETTLE_MS', 1000, 100, 600_000, problems),
    importMaxBytes: integer(env, 'BEACON_IMPORT_MAX_BYTES', 10 * 1024 ** 3, 1024, Number.MAX_SAFE_INTEGER, problems),
    importsRunningMax: integer(env, 'BEACON_IMPORTS_RUNNING_MAX', 1, 1, 16, problems),
    webhookAllowPrivate: boolean(env, 'BEACON_WEBHOOK_ALLOW_PRIVATE', false, problems),
    trustedProxies: addresses(env, 'BEACON_TRUSTED_PROXIES', problems),
    metrics: boolean(env, 'BEACON_METRICS', true, problems),
    metricsToken,
    requestLogSample: fraction(env, 'BEACON_REQUEST_LOG_SAMPLE', 0, problems),
    natsUrl: natsUrl(env, 'BEACON_NATS_URL', problems),
    natsAuth: natsAuth(env, problems),
    natsAckPendingMax: integer(env, 'BEACON_NATS_MAX_ACK_PENDING', 10_000, 1, 1_000_000, problems),
    natsAckWaitMs: integer(env, 'BEACON_NATS_ACK_WAIT_MS', 30_000, 1000, 3_600_000, problems),
    secretsKey: secretsKey(env, problems),
    sessionTtlMs: integer(env, 'BEACON_SESSION_TTL_MS', 43_200_000, 1000, 30 * 86_400_000, problems),
    mediaSizeMaxBytes: integer(env, 'BEACON_MEDIA_MAX_BYTES', 2 * 1024 * 1024, 1024, 64 * 1024 * 1024, problems),
    mediaPerAccountMax: integer(env, 'BEACON_MEDIA_PER_ACCOUNT_MAX', 1000, 1, 100_000, problems),
    reportFoldMs: integer(env, 'BEACON_REPORT_FOLD_MS', 10_000, 10, 3_600_000, problems),
    banditIntervalMs: integer(env, 'BEACON_BANDIT_INTERVAL_MS', 60_000, 10, 86_400_000, problems),
    reports: boolean(env, 'BEACON_REPORTS', true, problems),
    cluster: token(env, 'BEACON_CLUSTER', problems),
    nodeId: token(env, 'BEACON_NODE_ID', problems),
    publicUrl: publicUrl(env, problems),
    partitions: integer(env, 'BEACON_PARTITIONS', 64, 1, 4096, problems),
    replicas: integer(env, 'BEACON_REPLICAS', 1, 1, 5, problems),
    leaseMs: integer(env, 'BEACON_LEASE_MS', 3000, 100, 600_000, problems),
    natsAnyVersion: boolean(env, 'BEACON_NATS_ANY_VERSION', false, problems),
    clusterResign: boolean(env, 'BEACON_CLUSTER_RESIGN', false, problems),
    forwardBatch: boolean(env, 'BEACON_FORWARD_BATCH', true, problems),
    changelogStreams: integer(env, 'BEACON_CHANGELOG_STREAMS', 1, 1, 16, problems),
  }
  if (env.BEACON_CLUSTER !== undefined && env.BEACON_CLUSTER !== '') {
    // Cluster mode needs NATS (leases, changelogs) and one admin key shared by every node.
    if (env.BEACON_NATS_URL === undefined || env.BEACON_NATS_URL.trim() === '') problems.push('BEACON_CLUSTER: cluster mode needs BEACON_NATS_URL (the NATS JetStream cluster its nodes share)')
    if (adminKey === null) problems.push('BEACON_CLUSTER: cluster mode needs BEACON_ADMIN_KEY (the same on every node)')
    // The key that seals secrets and signs the cluster's entries: a data folder's own secrets.key would differ per node.
    if (config.secretsKey === null) problems.push('BEACON_CLUSTER: cluster mode needs BEACON_SECRETS_KEY (the same on every node; make one with: openssl rand -base64 32)')
  } else {
    for (const name of ['BEACON_NODE_ID', 'BEACON_PUBLIC_URL', 'BEACON_PARTITIONS', 'BEACON_REPLICAS', 'BEACON_LEASE_MS', 'BEACON_NATS_ANY_VERSION', 'BEACON_CLUSTER_RESIGN', 'BEACON_FORWARD_BATCH', 'BEACON_CHANGELOG_STREAMS']) {
      if (env[name] !== undefined && env[name] !== '') problems.push(`${name}: only applies in cluster mode (set BEACON_CLUSTER)`)
    }
  }
  if (problems.length > 0) throw new ConfigError(problems)
  return config
}
