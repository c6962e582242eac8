// HTTP framing at the edges (RFC 9112) over raw sockets: what Beacon refuses itself, what
// uWebSockets.js refuses (20.57: answered 400, or 505 for HTTP/1.0, and closed at once; 20.30: closed,
// never answered and never left open), and the same requests through a real nginx with the
// reverse-proxy settings of docs/deploy.md.

import { expect } from 'chai'
import net from 'node:net'
import { createTenant, startBeacon, visitorId, type BeaconProcess } from '../helpers/beacon.js'
import { startNginx, type Nginx } from '../helpers/nginx.js'
import { loadUws, uwsBuild } from '../../src/http/uws.js'

// The Beacon processes here run on the same Node, so on the same uWebSockets.js build
// (src/http/uws.ts). 20.30 closes a request its parser refuses without a word (at its idle timeout);
// 20.57 answers it.
loadUws()
const UWS_ANSWERS_REFUSALS = Number(uwsBuild()!.version.split('.')[1]) >= 57

interface RawAnswer {
  /** The status of the first answer, or 0 when none came. */
  status: number
  text: string
  /** The peer closed the connection (after answering, or without a word). */
  closed: boolean
}

/**
 * Write `request` as bytes and read until the peer closes, or `waitMs` passes. uWebSockets.js closes a
 * connection whose request it cannot parse at its 10 s idle timeout, so callers wait a little longer.
 */
function raw (port: number, request: string, waitMs: number): Promise<RawAnswer> {
  return new Promise(resolve => {
    const socket = net.connect(port, '127.0.0.1')
    let text = ''
    const done = (closed: boolean): void => {
      clearTimeout(timer)
      socket.destroy()
      const match = /^HTTP\/1\.[01] (\d{3})/.exec(text)
      resolve({ status: match === null ? 0 : Number(match[1]), text, closed })
    }
    const timer = setTimeout(() => done(false), waitMs)
    socket.setEncoding('latin1')
    socket.on('data', (chunk: string) => { text += chunk })
    socket.on('close', () => done(true))
    socket.on('error', () => {})
    socket.write(Buffer.from(request, 'latin1'))
  })
}

const UWS_IDLE_MS = 10_000
// uWebSockets.js checks its timeouts every few seconds: closed within 10 to 14 s, so 20 s leaves room for a loaded machine.
const WAIT_MS = UWS_IDLE_MS + 10_000

function eventBody (account: string): string {
  return JSON.stringify({ account, visitorId: visitorId(), platform: 'web', event: 'pageView' })
}

/** Requests RFC 9112 wants refused with 400 and the connection closed. */
function malformed (body: string): Record<string, string> {
  return {
    'two different Content-Length headers': `POST /campaigns/query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nContent-Length: ${body.length + 1}\r\n\r\n${body}`,
    'chunked and gzip on two Transfer-Encoding lines': `POST /campaigns/query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`,
    'chunked on two Transfer-Encoding lines': `POST /campaigns/query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`,
    'two equal Content-Length headers': `POST /campaigns/query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    'Transfer-Encoding: xchunked': `POST /campaigns/query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: xchunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`,
    'Transfer-Encoding and Content-Length': `POST /campaigns/query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nTransfer-Encoding: chunked\r\n\r\n${body}`,
    'a NUL in a header': 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Note: a\0b\r\n\r\n',
    'an obs-fold header line': 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Note: a\r\n b\r\n\r\n',
    'no Host header': 'GET /healthz HTTP/1.1\r\n\r\n',
  }
}

describe('HTTP framing edges', function () {
  this.timeout(60_000)
  let beacon: BeaconProcess
  let account: string
  before(async () => {
    beacon = await startBeacon()
    account = (await createTenant(beacon.url)).account
  })
  after(() => beacon.stop())

  it('refuses more than one Content-Length or Transfer-Encoding line and a transfer coding other than chunked with 400 bad_framing and closes', async () => {
    const cases = malformed(eventBody(account))
    // issue 27: only the first Transfer-Encoding line was checked, and equal Content-Lengths passed.
    for (const name of ['two different Content-Length headers', 'Transfer-Encoding: xchunked', 'chunked and gzip on two Transfer-Encoding lines', 'chunked on two Transfer-Encoding lines', 'two equal Content-Length headers']) {
      const answer = await raw(beacon.port, cases[name]!, WAIT_MS)
      expect(answer.status, name).to.equal(400)
      expect(answer.text, name).to.include('"code":"bad_framing"')
      expect(answer.text.toLowerCase(), name).to.include('connection: close')
      expect(answer.closed, name).to.equal(true)
    }
  })

  it(`leaves no malformed request or HTTP/1.0 request hanging: each is ${UWS_ANSWERS_REFUSALS ? 'answered 400 (HTTP/1.0: 505)' : 'answered 400 or its connection closed'} (uWebSockets.js ${uwsBuild()!.version})`, async () => {
    const cases = { ...malformed(eventBody(account)), 'HTTP/1.0': 'GET /healthz HTTP/1.0\r\nHost: x\r\n\r\n' }
    const answers = await Promise.all(Object.entries(cases).map(async ([name, request]) => [name, await raw(beacon.port, request, WAIT_MS)] as const))
    for (const [name, answer] of answers) {
      expect(answer.closed, `${name}: the connection was left open`).to.equal(true)
      if (UWS_ANSWERS_REFUSALS) expect(answer.status, `${name}: ${answer.text.slice(0, 80)}`).to.equal(name === 'HTTP/1.0' ? 505 : 400)
      else expect([0, 400], `${name}: ${answer.text.slice(0, 80)}`).to.include(answer.status)
    }
    // Still serving.
    expect((await fetch(`${beacon.url}/healthz`)).status).to.equal(200)
  })
})

describe('behind nginx with the documented proxy settings', function () {
  this.timeout(60_000)
  let beacon: BeaconProcess
  let nginx: Nginx
  let account: string
  before(async () => {
    beacon = await startBeacon()
    account = (await createTenant(beacon.url)).account
    // The directives of docs/deploy.md.
    nginx = await startNginx(`127.0.0.1:${beacon.port}`, `
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
      client_max_body_size 64k;`)
  })
  after(async () => {
    await nginx?.stop()
    await beacon.stop()
  })

  it('answers HTTP/1.0 clients (nginx speaks HTTP/1.1 to Beacon)', async () => {
    const health = await raw(nginx.port, 'GET /healthz HTTP/1.0\r\n\r\n', WAIT_MS)
    expect(health.status, health.text).to.equal(200)
    expect(health.text).to.include('{"status":"ok"}')
    const body = eventBody(account)
    const event = await raw(nginx.port, `POST /campaigns/query HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`, WAIT_MS)
    expect(event.status, event.text).to.equal(200)
    expect(event.text).to.include('"campaigns":[]')
  })

  it('answers HTTP/1.1 clients over kept-alive upstream connections', async () => {
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${nginx.url}/campaigns/query`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: eventBody(account) })
      expect(res.status).to.equal(200)
      expect((await res.json() as { campaigns: unknown[] }).campaigns).to.deep.equal([])
    }
  })

  it('refuses every malformed request in front of Beacon (400, or 501 for an unknown transfer coding) and closes', async () => {
    const answers = await Promise.all(Object.entries(malformed(eventBody(account))).map(async ([name, request]) => [name, await raw(nginx.port, request, WAIT_MS)] as const))
    for (const [name, answer] of answers) {
      expect([400, 501], `${name}: ${answer.text.slice(0, 80)}`).to.include(answer.status)
      expect(answer.closed, name).to.equal(true)
    }
  })
})

describe('behind nginx with its default proxy settings (HTTP/1.0 to the upstream)', function () {
  this.timeout(60_000)
  it(`gets no answer from Beacon: ${UWS_ANSWERS_REFUSALS ? 'uWebSockets.js refuses the HTTP/1.0 request nginx sends with 505' : 'nginx answers 502 once uWebSockets.js drops the HTTP/1.0 request'} (hence proxy_http_version 1.1)`, async () => {
    const beacon = await startBeacon()
    const nginx = await startNginx(`127.0.0.1:${beacon.port}`, '')
    try {
      const answer = await raw(nginx.port, 'GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n', WAIT_MS + 5_000)
      if (UWS_ANSWERS_REFUSALS) {
        expect(answer.status, answer.text.slice(0, 80)).to.equal(505)
        expect(answer.text).to.include('This server does not support HTTP/1.0.')
      } else {
        expect(answer.status, answer.text.slice(0, 80)).to.equal(502)
        expect(nginx.errors()).to.include('upstream prematurely closed connection')
      }
    } finally {
      await nginx.stop()
      await beacon.stop()
    }
  })
})
