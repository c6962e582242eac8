// A real 3-server nats-server cluster with JetStream on loopback, for the cluster tests: each server on a
// random client port and a random route port, with its own temp store dir and server name, all routed to
// each other. start() returns once a metadata leader is elected (an R3 stream can be created). One server
// can be killed, stopped and restarted (same ports, same store dir); close() stops all and removes the dirs.
// Never the shared server on 127.0.0.1:4222.

import { connect } from '@nats-io/transport-node'
import { jetstreamManager } from '@nats-io/jetstream'
import { freePort, startNatsServer, type NatsServer } from './nats-server.js'

export interface NatsCluster {
  /** The three servers' client URLs, nats://127.0.0.1:<port>. */
  urls: string[]
  servers: NatsServer[]
  /** The servers' names (server_name), in the order of `servers`: stream info names its leader by these. */
  names: string[]
  /** Resolves once an R3 stream can be created and removed again (a metadata leader and a quorum). */
  waitForQuorum (timeoutMs?: number): Promise<void>
  close (): Promise<void>
}

const SERVERS = 3

let clusters = 0

export async function startNatsCluster (): Promise<NatsCluster> {
  const name = `bc${process.pid}x${++clusters}`
  const routePorts: number[] = []
  for (let i = 0; i < SERVERS; i++) routePorts.push(await freePort())
  const routes = routePorts.map(port => `nats-route://127.0.0.1:${port}`).join(',')
  const servers: NatsServer[] = []
  try {
    // Started together: each waits for its own client port only, and routes form as the others come up.
    const started = await Promise.all(routePorts.map((routePort, i) => startNatsServer({
      args: ['--server_name', `${name}-n${i + 1}`, '--cluster_name', name,
        '--cluster', `nats://127.0.0.1:${routePort}`, '--routes', routes],
    })))
    servers.push(...started)
    const cluster: NatsCluster = {
      urls: servers.map(server => server.url),
      servers,
      names: routePorts.map((_, i) => `${name}-n${i + 1}`),
      waitForQuorum: (timeoutMs = 30_000) => waitForQuorum(servers.map(server => server.url), timeoutMs),
      async close () {
        await Promise.all(servers.map(server => server.close()))
      },
    }
    await cluster.waitForQuorum()
    return cluster
  } catch (error) {
    await Promise.all(servers.map(server => server.close()))
    throw error
  }
}

async function waitForQuorum (urls: string[], timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  const nc = await connect({ servers: urls, reconnectTimeWait: 100, maxReconnectAttempts: -1 })
  const stream = `QUORUM_PROBE_${process.pid}_${Date.now()}`
  let last: unknown = null
  try {
    // No API check here: $JS.API.INFO itself times out until the metadata leader is elected.
    const jsm = await jetstreamManager(nc, { timeout: 2000, checkAPI: false })
    for (;;) {
      try {
        await jsm.streams.add({ name: stream, subjects: [`quorum.probe.${stream}`], num_replicas: SERVERS })
        await jsm.streams.delete(stream)
        return
      } catch (error) {
        last = error
      }
      if (Date.now() > deadline) throw new Error(`the NATS cluster formed no JetStream quorum within ${timeoutMs} ms: ${String(last)}`)
      await new Promise(resolve => setTimeout(resolve, 100))
    }
  } finally {
    await nc.close()
  }
}
