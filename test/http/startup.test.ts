import { expect } from 'chai'
import { spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { createServer, type AddressInfo } from 'node:net'
import { existsSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { admin, createTenant, post, removeDir, startBeacon, tempDir, visitorId } from '../helpers/beacon.js'
import { until } from '../helpers/until.js'

const MAIN = new URL('../../dist/src/main.js', import.meta.url).pathname

describe('start and stop', () => {
  it('refuses to start on bad settings with one line per bad value and exit code 1', () => {
    const dataDir = tempDir()
    const run = spawnSync(process.execPath, [MAIN], {
      env: { PATH: process.env.PATH ?? '', BEACON_PORT: 'http', BEACON_DURABILITY: 'sometimes', BEACON_LOG_LEVEL: 'loud', BEACON_DATA_DIR: dataDir },
      encoding: 'utf8',
    })
    removeDir(dataDir)
    expect(run.status).to.equal(1)
    expect(run.stderr).to.include('BEACON_PORT="http": expected a whole number from 0 to 65535')
    expect(run.stderr).to.include('BEACON_DURABILITY="sometimes": expected one of flushed, committed')
    expect(run.stderr).to.include('BEACON_LOG_LEVEL="loud": expected one of fatal, error, warn, info, debug, trace, silent')
  })

  it('refuses a port another Beacon listens on (exit code 1) instead of sharing it', async () => {
    // A fixed port for both, as operators run it (a server that asked for port 0 shares nothing).
    const free = createServer().listen(0, '127.0.0.1')
    await once(free, 'listening')
    const port = (free.address() as AddressInfo).port
    await new Promise(resolve => free.close(resolve))
    const first = await startBeacon({ env: { BEACON_PORT: String(port) } })
    const dataDir = tempDir()
    try {
      const run = spawnSync(process.execPath, [MAIN], {
        env: { PATH: process.env.PATH ?? '', BEACON_HOST: '127.0.0.1', BEACON_PORT: String(first.port), BEACON_DATA_DIR: dataDir, BEACON_ADMIN_KEY: 'k'.repeat(32) },
        encoding: 'utf8',
        timeout: 10_000,
        killSignal: 'SIGKILL',
      })
      expect(run.status).to.equal(1)
      expect(run.stdout + run.stderr).to.include(`cannot listen on 127.0.0.1:${first.port} (in use by another process`)
    } finally {
      await first.stop()
      removeDir(first.dataDir)
      removeDir(dataDir)
    }
  })

  it('generates an admin key on first start, keeps it 0600 in the data folder and prints it only once', async () => {
    const dataDir = tempDir()
    try {
      const first = await startBeacon({ dataDir, env: { BEACON_ADMIN_KEY: '' } })
      const key = readFileSync(join(dataDir, 'admin.key'), 'utf8').trim()
      expect(statSync(join(dataDir, 'admin.key')).mode & 0o777).to.equal(0o600)
      // Printed right after the "beacon started" line, once the server listens.
      await until('the key printed', () => first.output().includes(key))
      expect((await admin(first.url, 'GET', '/admin/accounts', undefined, key)).status).to.equal(200)
      await first.stop()
      const second = await startBeacon({ dataDir, env: { BEACON_ADMIN_KEY: '' } })
      expect(second.output()).not.to.include(key)
      expect((await admin(second.url, 'GET', '/admin/accounts', undefined, key)).status).to.equal(200)
      await second.stop()
    } finally {
      removeDir(dataDir)
    }
  })

  it('says why a start failed on one stderr line, and keeps a generated admin key to print on the first start that listens', async () => {
    const busy = createServer().listen(0, '127.0.0.1')
    await once(busy, 'listening')
    const port = (busy.address() as AddressInfo).port
    const dataDir = tempDir()
    try {
      const failed = spawnSync(process.execPath, [MAIN], {
        env: { PATH: process.env.PATH ?? '', BEACON_HOST: '127.0.0.1', BEACON_PORT: String(port), BEACON_DATA_DIR: dataDir },
        encoding: 'utf8', timeout: 10_000, killSignal: 'SIGKILL',
      })
      expect(failed.status).to.equal(1)
      expect(failed.stderr).to.equal(`beacon: failed to start: cannot listen on 127.0.0.1:${port} (in use by another process, or not permitted)\n`)
      const key = readFileSync(join(dataDir, 'admin.key'), 'utf8').trim()
      expect(failed.stdout + failed.stderr).to.not.include(key)
      const first = await startBeacon({ dataDir, env: { BEACON_ADMIN_KEY: '' } })
      await until('the key printed', () => first.output().includes(key))
      expect((await admin(first.url, 'GET', '/admin/accounts', undefined, key)).status).to.equal(200)
      await first.stop()
      const second = await startBeacon({ dataDir, env: { BEACON_ADMIN_KEY: '' } })
      await second.stop()
      expect(second.output()).to.not.include(key)
    } finally {
      busy.close()
      removeDir(dataDir)
    }
  })

  it('refuses to start on a Node no uWebSockets.js binding loads on: one stderr line, exit code 1, nothing written', () => {
    const dataDir = tempDir()
    try {
      // A Node whose ABI no installed build has a binary for: this one, told so before Beacon starts.
      const otherAbi = "data:text/javascript,Object.defineProperty(process.versions,'modules',{value:'999'})"
      const failed = spawnSync(process.execPath, ['--import', otherAbi, MAIN], {
        env: { PATH: process.env.PATH ?? '', BEACON_HOST: '127.0.0.1', BEACON_PORT: '0', BEACON_DATA_DIR: dataDir },
        encoding: 'utf8', timeout: 10_000, killSignal: 'SIGKILL',
      })
      expect(failed.status).to.equal(1)
      const lines = failed.stderr.trim().split('\n')
      expect(lines, failed.stderr).to.have.length(1)
      expect(lines[0]).to.match(/^beacon: no uWebSockets\.js native binding loads on Node v[\d.]+ \(ABI 999, [^)]*\): /)
      expect(failed.stdout).to.equal('')
      expect(existsSync(join(dataDir, 'admin.key'))).to.equal(false)
    } finally {
      removeDir(dataDir)
    }
  })

  it('names the NATS server it cannot reach on one stderr line, without its credentials', async () => {
    const closed = createServer().listen(0, '127.0.0.1')
    await once(closed, 'listening')
    const port = (closed.address() as AddressInfo).port
    await new Promise(resolve => closed.close(resolve))
    const dataDir = tempDir()
    try {
      const failed = spawnSync(process.execPath, [MAIN], {
        env: { PATH: process.env.PATH ?? '', BEACON_HOST: '127.0.0.1', BEACON_PORT: '0', BEACON_DATA_DIR: dataDir, BEACON_NATS_URL: `nats://shop:s3cret-pw@127.0.0.1:${port}` },
        encoding: 'utf8', timeout: 20_000, killSignal: 'SIGKILL',
      })
      expect(failed.status).to.equal(1)
      const lines = failed.stderr.trim().split('\n')
      expect(lines).to.have.length(1)
      expect(lines[0]).to.match(new RegExp(`^beacon: failed to start: cannot connect to NATS at nats://\\[redacted\\]@127\\.0\\.0\\.1:${port} `))
      expect(failed.stdout + failed.stderr).to.not.include('s3cret-pw')
      expect(failed.stdout).to.not.include('Generated an admin key')
    } finally {
      removeDir(dataDir)
    }
  })

  it('on SIGTERM finishes the writes in flight, exits 0, and loses none of the acknowledged ones', async () => {
    const dataDir = tempDir()
    try {
      let beacon = await startBeacon({ dataDir })
      const tenant = await createTenant(beacon.url)
      const id = visitorId()
      const writes = Array.from({ length: 300 }, (_, i) =>
        post(beacon.url, '/visitors/attributes', { account: tenant.account, visitorId: id, token: tenant.token, attributes: { [`k${i}`]: i } })
          .then(r => r.status, () => 0))
      await new Promise(resolve => setTimeout(resolve, 5))
      const code = await beacon.stop()
      const statuses = await Promise.all(writes)
      expect(code).to.equal(0)
      // Every request got an answer or was never accepted (connection refused after the listener closed).
      expect(statuses.every(s => s === 200 || s === 503 || s === 0)).to.equal(true)
      beacon = await startBeacon({ dataDir })
      const q = await post(beacon.url, '/visitors/query', { account: tenant.account, visitorId: id, token: tenant.token })
      for (let i = 0; i < statuses.length; i++) {
        if (statuses[i] === 200) expect(q.body.attributes[`k${i}`], `k${i}`).to.deep.equal([{ value: i }])
      }
      await beacon.kill()
    } finally {
      removeDir(dataDir)
    }
  })
})
