// The NATS connection of the delivery transport and of cluster mode: reconnecting forever,
// authenticated by the settings (a user and password, a creds file, an nkey seed: NatsAuth) or by the
// credentials of the URLs, TLS checked against the configured CA. docs/cluster-security.md.

import { readFileSync } from 'node:fs'
import { connect as natsConnect, credsAuthenticator, nkeyAuthenticator, type ConnectionOptions, type NatsConnection } from '@nats-io/transport-node'
import type { NatsAuth } from '../../config.js'
import { log } from '../../log.js'
import { NATS_PING_INTERVAL_MS, NATS_PINGS_OUT_MAX, NATS_RECONNECT_DELAY_MS, NATS_RECONNECT_JITTER_MS } from '../limits.js'

export const NO_NATS_AUTH: NatsAuth = { user: null, password: null, credsFile: null, nkeyFile: null, tlsCaFile: null, tlsCertFile: null, tlsKeyFile: null }

/**
 * Connect to the first server of a comma-separated URL list that answers. Logs one warning when the
 * server let this connection in without asking for credentials (anyone who reaches it can then read
 * and write every bucket).
 */
export async function connectNats (urls: string, name: string, access: NatsAuth = NO_NATS_AUTH): Promise<NatsConnection> {
  const { servers, auth } = serversOf(urls)
  if (servers.length === 0) throw new Error('JetStreamQueue: no NATS server URL')
  const nc = await natsConnect({
    servers,
    ...auth,
    ...accessOptions(access),
    name,
    reconnect: true,
    maxReconnectAttempts: -1,
    reconnectTimeWait: NATS_RECONNECT_DELAY_MS,
    reconnectJitter: NATS_RECONNECT_JITTER_MS,
    pingInterval: NATS_PING_INTERVAL_MS,
    maxPingOut: NATS_PINGS_OUT_MAX,
    // Otherwise nats.js builds two Error objects (stack traces) for every request and publish it
    // awaits, in case it times out: 13 % of a cluster node's CPU (bench:cluster profile, 2026-11-25).
    noAsyncTraces: true,
  })
  if (nc.info?.auth_required !== true) {
    log.warn({ connection: name, server: nc.info?.server_name }, 'the NATS server accepted this connection without authentication: anyone who reaches it can read and write Beacon\'s streams and buckets (docs/cluster-security.md)')
  }
  return nc
}

/** The connection options of the settings: an authenticator or user and password, and TLS files. */
export function accessOptions (access: NatsAuth): Partial<ConnectionOptions> {
  const options: Partial<ConnectionOptions> = {}
  if (access.user !== null && access.password !== null) {
    options.user = access.user
    options.pass = access.password
  }
  // Read at each (re)connection: a creds file replaced by a rotation is picked up without a restart.
  if (access.credsFile !== null) {
    const file = access.credsFile
    options.authenticator = credsAuthenticator(() => readFileSync(file))
  }
  if (access.nkeyFile !== null) {
    const file = access.nkeyFile
    options.authenticator = nkeyAuthenticator(() => new TextEncoder().encode(readFileSync(file, 'utf8').trim()))
  }
  if (access.tlsCaFile !== null || access.tlsCertFile !== null) {
    options.tls = {
      ...(access.tlsCaFile === null ? {} : { caFile: access.tlsCaFile }),
      ...(access.tlsCertFile === null ? {} : { certFile: access.tlsCertFile, keyFile: access.tlsKeyFile ?? undefined }),
    }
  }
  return options
}

/**
 * The servers of a comma-separated URL list, credentials taken out: nats.js does not read them from
 * a URL. `nats://user:password@host` gives user and password, `nats://token@host` a token.
 */
export function serversOf (urls: string): { servers: string[], auth: { user?: string, pass?: string, token?: string } } {
  const servers: string[] = []
  let auth: { user?: string, pass?: string, token?: string } = {}
  for (const text of urls.split(',').map(s => s.trim()).filter(s => s !== '')) {
    const url = new URL(text)
    const user = decodeURIComponent(url.username)
    const pass = decodeURIComponent(url.password)
    if (user !== '') auth = pass === '' ? { token: user } : { user, pass }
    url.username = ''
    url.password = ''
    servers.push(`${url.protocol}//${url.host}`)
  }
  return { servers, auth }
}
