// A TCP link between a client and one server (a NATS server, here) whose server-to-client direction can
// be held: what the server sends meanwhile is kept, in order, and delivered on release. To the client,
// its requests reached the server (they are stored, applied) but no answer comes back: what a process
// paused by SIGSTOP, or a network that drops one direction for a while, sees.

import { createServer, connect, type Server, type Socket } from 'node:net'

export interface HeldLink {
  /** `nats://127.0.0.1:<port>`: connect the client here. */
  url: string
  /** From now on the server's bytes are kept, not sent on. */
  hold (): void
  /** Sends what was kept and lets the rest through. */
  release (): void
  close (): Promise<void>
}

export async function startHeldLink (target: string): Promise<HeldLink> {
  const { hostname, port } = new URL(target)
  const sockets = new Set<Socket>()
  const kept: [Socket, Buffer][] = []
  let holding = false
  const server: Server = createServer(client => {
    const upstream = connect(Number(port), hostname)
    sockets.add(client).add(upstream)
    client.on('data', chunk => upstream.write(chunk))
    upstream.on('data', chunk => {
      if (holding) kept.push([client, chunk])
      else client.write(chunk)
    })
    const end = (): void => {
      client.destroy()
      upstream.destroy()
      sockets.delete(client)
      sockets.delete(upstream)
    }
    client.on('error', end).on('close', end)
    upstream.on('error', end).on('close', end)
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('the link has no TCP address')
  return {
    url: `nats://127.0.0.1:${address.port}`,
    hold: () => { holding = true },
    release: () => {
      holding = false
      for (const [client, chunk] of kept.splice(0)) if (!client.destroyed) client.write(chunk)
    },
    close: async () => {
      for (const socket of sockets) socket.destroy()
      await new Promise<void>(resolve => server.close(() => resolve()))
    },
  }
}
