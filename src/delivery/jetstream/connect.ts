// The NATS connection of the delivery transport: reconnecting forever, credentials taken from the URLs.

import { connect as natsConnect, type NatsConnection } from '@nats-io/transport-node'
import { NATS_PING_INTERVAL_MS, NATS_PINGS_OUT_MAX, NATS_RECONNECT_DELAY_MS, NATS_RECONNECT_JITTER_MS } from '../limits.js'

/** Connect to the first server of a comma-separated URL list that answers. */
export async function connectNats (urls: string, name: string): Promise<NatsConnection> {
  const { servers, auth } = serversOf(urls)
  if (servers.length === 0) throw new Error('JetStreamQueue: no NATS server URL')
  return await natsConnect({
    servers,
    ...auth,
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
