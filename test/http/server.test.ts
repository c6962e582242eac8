// The uWebSockets.js frontend on its own: what a draining server still answers on an open connection.

import { expect } from 'chai'
import { Client } from 'undici'
import { HttpServer, type Route } from '../../src/http/server.js'

describe('HttpServer while draining', () => {
  it('answers routes marked whileDraining (health) and refuses others with 503 shutting_down', async () => {
    let release!: () => void
    const slow = new Promise<void>(resolve => { release = resolve })
    const routes: Route[] = [
      { method: 'get', pattern: '/slow', body: false, handler: async () => { await slow; return { status: 200, body: { slow: true } } } },
      { method: 'get', pattern: '/health', body: false, whileDraining: true, handler: () => ({ status: 200, body: { status: 'ok' } }) },
      { method: 'get', pattern: '/other', body: false, handler: () => ({ status: 200, body: { other: true } }) },
    ]
    const server = new HttpServer({ host: '127.0.0.1', port: 0, bodySizeMaxBytes: 1024, inflightMax: 10, routes, onError: () => {} })
    const port = await server.listen()
    const a = new Client(`http://127.0.0.1:${port}`)
    const b = new Client(`http://127.0.0.1:${port}`)
    try {
      const inFlight = a.request({ method: 'GET', path: '/slow' })
      expect((await b.request({ method: 'GET', path: '/other' })).statusCode).to.equal(200) // b's connection is open now
      await new Promise(resolve => setTimeout(resolve, 20))
      const drained = server.drain()
      const health = await b.request({ method: 'GET', path: '/health' })
      expect(health.statusCode).to.equal(200)
      expect(await health.body.json()).to.deep.equal({ status: 'ok' })
      const other = await b.request({ method: 'GET', path: '/other' })
      expect(other.statusCode).to.equal(503)
      expect(other.headers['retry-after']).to.equal('1')
      expect(((await other.body.json()) as { errors: { code: string }[] }).errors[0]!.code).to.equal('shutting_down')
      release()
      expect((await inFlight).statusCode).to.equal(200)
      await drained
    } finally {
      await a.close()
      await b.close()
    }
  })
})
