// A real HTTP server in front of a real Beacon, for the client's retry and routing tests: each request
// it receives takes the next scripted action (answer with a given status, headers and body; drop the
// connection; or pass the request on to Beacon and relay its answer), and it records every request's
// method, path and headers. Once the script is used up, every request passes.

import { createServer, type IncomingHttpHeaders, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

export type FrontAction =
  | 'pass'
  | 'drop'
  | { status: number, headers?: Record<string, string>, body?: unknown, pass?: false }
  /** Pass the request on, adding these headers to Beacon's answer. */
  | { pass: true, headers: Record<string, string> }

export interface Front {
  url: string
  script: FrontAction[]
  seen: Array<{ method: string, path: string, headers: IncomingHttpHeaders }>
  close: () => Promise<void>
}

/** Headers of the hop itself, not passed on (fetch sets its own). */
const HOP_HEADERS = new Set(['host', 'connection', 'content-length', 'transfer-encoding', 'keep-alive'])

export async function startFront (target: string): Promise<Front> {
  const front: Front = { url: '', script: [], seen: [], close: async () => {} }
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      front.seen.push({ method: req.method!, path: req.url!, headers: req.headers })
      const action = front.script.shift() ?? 'pass'
      if (action === 'drop') {
        req.socket.destroy()
        return
      }
      if (action !== 'pass' && action.pass !== true) {
        res.writeHead(action.status, { 'content-type': 'application/json', ...action.headers }).end(action.body === undefined ? '' : JSON.stringify(action.body))
        return
      }
      const extra = action === 'pass' ? {} : action.headers
      const headers: Record<string, string> = {}
      for (const [name, value] of Object.entries(req.headers)) if (typeof value === 'string' && !HOP_HEADERS.has(name)) headers[name] = value
      const body = chunks.length === 0 ? undefined : Buffer.concat(chunks)
      fetch(target + req.url!, { method: req.method!, headers, body }).then(async answer => {
        const text = await answer.text()
        res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'application/json', ...extra }).end(text)
      }, () => { req.socket.destroy() })
    })
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  front.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  front.close = () => new Promise<void>(resolve => { server.closeAllConnections(); server.close(() => resolve()) })
  return front
}
