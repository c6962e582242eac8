// Which uWebSockets.js binding Beacon runs on (src/http/uws.ts): a native one for the running Node's ABI,
// or a refusal that says why on one line; never a build's JavaScript fallback server.

import { expect } from 'chai'
import net from 'node:net'
import { loadUws, pickUws, thisRuntime, uwsBuild, UwsUnavailableError } from '../../src/http/uws.js'

function refusal (abi: string): UwsUnavailableError {
  try {
    pickUws({ ...thisRuntime(), abi })
  } catch (error) {
    expect(error).to.be.instanceOf(UwsUnavailableError)
    return error as UwsUnavailableError
  }
  throw new Error(`a binding loaded for ABI ${abi}`)
}

describe('uWebSockets.js binding', () => {
  it("loads a native binary built for the running Node's ABI", () => {
    const binding = loadUws()
    const build = uwsBuild()
    expect(build).to.not.equal(null)
    expect(build!.file).to.match(new RegExp(`/uws_${process.platform}_${process.arch}_${process.versions.modules}\\.node$`))
    expect(['@btc-vision/uwebsockets.js', '@trufflesuite/uws-js-unofficial']).to.include(build!.package)
    // A native function, not the JavaScript fallback server @trufflesuite's own entry point falls back to.
    expect(Function.prototype.toString.call(binding.App)).to.include('[native code]')
    expect(loadUws()).to.equal(binding)
  })

  it('refuses an ABI no build has a binary for, naming each build on one line', () => {
    const error = refusal('999')
    expect(error.message).to.not.include('\n')
    expect(error.message).to.match(/^no uWebSockets\.js native binding loads on Node v\d+\.\d+\.\d+ \(ABI 999, /)
    expect(error.message).to.include('@btc-vision/uwebsockets.js 20.57.0: no binary for ABI 999')
    expect(error.message).to.include('@trufflesuite/uws-js-unofficial 20.30.0-unofficial.0: no binary for ABI 999')
    expect(error.message).to.include('see docs/operations.md')
  })

  it("refuses, rather than falling back to JavaScript, when a build's binary is there but does not load", () => {
    // @trufflesuite has a Node 16 binary (ABI 93); this Node cannot load it, which is where that
    // package's own entry point would serve HTTP from JavaScript instead.
    const error = refusal('93')
    expect(error.message).to.not.include('\n')
    expect(error.message).to.include('@btc-vision/uwebsockets.js 20.57.0: no binary for ABI 93')
    // Node's own words for it (e.g. "Module did not self-register: '…/uws_linux_x64_93.node'").
    expect(error.message).to.match(new RegExp(`@trufflesuite/uws-js-unofficial 20\\.30\\.0-unofficial\\.0: [^;]*uws_${process.platform}_${process.arch}_93\\.node`))
  })

  it('takes a request line and headers of up to 16 KiB (20.57 answers 431 above; its own default is 4 KiB)', async () => {
    const uws = loadUws()
    const app = uws.App()
    app.get('/*', res => { res.end('ok') })
    const socket = await new Promise<uWSListenSocket>((resolve, reject) => app.listen('127.0.0.1', 0, s => s === false ? reject(new Error('no port')) : resolve(s)))
    const port = uws.us_socket_local_port(socket)
    try {
      const under = await firstLine(port, `GET /?after=${'x'.repeat(12_000)} HTTP/1.1\r\nHost: x\r\nCookie: ${'c'.repeat(3_000)}\r\n\r\n`)
      expect(under).to.equal('HTTP/1.1 200 OK')
      if (Number(uwsBuild()!.version.split('.')[1]) >= 57) {
        expect(await firstLine(port, `GET /?after=${'x'.repeat(17_000)} HTTP/1.1\r\nHost: x\r\n\r\n`)).to.equal('HTTP/1.1 431 Request Header Fields Too Large')
      }
    } finally {
      uws.us_listen_socket_close(socket)
    }
  })
})

type uWSListenSocket = Parameters<ReturnType<typeof loadUws>['us_listen_socket_close']>[0]

/** The status line of the answer to `request`, written on a fresh connection. */
function firstLine (port: number, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1')
    let text = ''
    socket.setEncoding('latin1')
    socket.on('data', (chunk: string) => {
      text += chunk
      const end = text.indexOf('\r\n')
      if (end >= 0) {
        socket.destroy()
        resolve(text.slice(0, end))
      }
    })
    socket.on('close', () => resolve(text))
    socket.on('error', reject)
    socket.write(request)
  })
}
