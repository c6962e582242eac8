import { expect } from 'chai'
import { spawnSync } from 'node:child_process'
import { chmodSync, existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { ADMIN_KEY, admin, createTenant, post, removeDir, startBeacon, tempDir, visitorId } from '../helpers/beacon.js'
import { beacon } from '../helpers/cli.js'

const MAIN = new URL('../../dist/src/main.js', import.meta.url).pathname

function mode (path: string): number {
  return statSync(path).mode & 0o777
}

/** A second server on the folder, run to its end: it must refuse at once. */
function secondStart (dataDir: string): ReturnType<typeof spawnSync> {
  return spawnSync(process.execPath, [MAIN], {
    env: { PATH: process.env.PATH ?? '', BEACON_HOST: '127.0.0.1', BEACON_PORT: '0', BEACON_DATA_DIR: dataDir, BEACON_ADMIN_KEY: ADMIN_KEY },
    encoding: 'utf8',
    timeout: 15_000,
    killSignal: 'SIGKILL',
  })
}

describe('one process per data folder', () => {
  it('refuses a second server on the same folder with exit code 1 and one line naming the holder', async () => {
    const first = await startBeacon()
    try {
      const run = secondStart(first.dataDir)
      expect(run.status).to.equal(1)
      const lines = String(run.stderr).trim().split('\n')
      expect(lines).to.have.length(1)
      expect(lines[0]).to.include(`in use by another Beacon process (PID ${first.child.pid}`)
      expect(String(run.stdout)).not.to.include('beacon started')
      // The first is untouched: it still serves, and still holds the folder.
      expect((await admin(first.url, 'GET', '/admin/accounts')).status).to.equal(200)
      expect(readFileSync(join(first.dataDir, 'beacon.pid'), 'utf8').split('\n')[0]).to.equal(String(first.child.pid))
    } finally {
      await first.stop()
      removeDir(first.dataDir)
    }
  })

  it('starts again after the holder was SIGKILLed (a stale lock file does not block), and a clean stop removes the file', async () => {
    const dataDir = tempDir()
    try {
      const first = await startBeacon({ dataDir })
      const tenant = await createTenant(first.url)
      await first.kill()
      expect(existsSync(join(dataDir, 'beacon.pid'))).to.equal(true)
      const second = await startBeacon({ dataDir })
      expect((await admin(second.url, 'GET', `/admin/accounts/${tenant.account}`)).status).to.equal(200)
      expect(readFileSync(join(dataDir, 'beacon.pid'), 'utf8').split('\n')[0]).to.equal(String(second.child.pid))
      expect(await second.stop()).to.equal(0)
      expect(existsSync(join(dataDir, 'beacon.pid'))).to.equal(false)
    } finally {
      removeDir(dataDir)
    }
  })

  it('tells a PID reused by another process from the holder by its start time', async () => {
    const dataDir = tempDir()
    try {
      // This test process runs, but it did not start when the file says: a stale file from a PID reused.
      writeFileSync(join(dataDir, 'beacon.pid'), `${process.pid}\n1\n`)
      const server = await startBeacon({ dataDir })
      expect(readFileSync(join(dataDir, 'beacon.pid'), 'utf8').split('\n')[0]).to.equal(String(server.child.pid))
      await server.stop()
      // With its real start time, the same live PID holds the folder.
      const stat = readFileSync(`/proc/${process.pid}/stat`, 'utf8')
      const startTime = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]
      writeFileSync(join(dataDir, 'beacon.pid'), `${process.pid}\n${startTime}\n`)
      const run = secondStart(dataDir)
      expect(run.status).to.equal(1)
      expect(String(run.stderr)).to.include(`(PID ${process.pid}`)
    } finally {
      removeDir(dataDir)
    }
  })

  it('lets backup and admin-key run beside the server (they do not write the database)', async () => {
    const first = await startBeacon({ env: { BEACON_ADMIN_KEY: '' } })
    const dir = tempDir()
    try {
      const key = await beacon(['admin-key'], { BEACON_DATA_DIR: first.dataDir })
      expect(key.code, key.stderr).to.equal(0)
      const out = join(dir, 'copy')
      const run = await beacon(['backup', '--out', out], { BEACON_DATA_DIR: first.dataDir })
      expect(run.code, run.stderr).to.equal(0)
      expect(existsSync(join(out, 'beacon.pid'))).to.equal(false)
    } finally {
      await first.stop()
      removeDir(first.dataDir)
      removeDir(dir)
    }
  })
})

describe('data folder permissions', () => {
  it('keeps the data folder 0700, every file in it 0600 and its folders (imports/) 0700, an older folder tightened at start', async () => {
    const dataDir = tempDir()
    chmodSync(dataDir, 0o755)
    const first = await startBeacon({ dataDir, env: { BEACON_ADMIN_KEY: '' } })
    try {
      const key = readFileSync(join(dataDir, 'admin.key'), 'utf8').trim()
      expect((await admin(first.url, 'POST', '/admin/accounts', { name: 'Modes' }, key)).status).to.equal(201)
      expect(mode(dataDir)).to.equal(0o700)
      const files = readdirSync(dataDir)
      expect(files).to.include.members(['data.mdb', 'lock.mdb', 'admin.key', 'beacon.pid'])
      for (const file of files) expect(mode(join(dataDir, file)), file).to.equal(statSync(join(dataDir, file)).isDirectory() ? 0o700 : 0o600)
    } finally {
      await first.stop()
      removeDir(dataDir)
    }
  })

  it('leaves the mode of a folder that also holds files not Beacon\'s (a shared folder), and says so', async () => {
    const dataDir = tempDir()
    chmodSync(dataDir, 0o755)
    writeFileSync(join(dataDir, 'notes.txt'), 'not beacon\'s')
    const server = await startBeacon({ dataDir })
    try {
      expect(mode(dataDir)).to.equal(0o755)
      expect(server.output()).to.include('its mode is left as it is')
      expect(mode(join(dataDir, 'data.mdb'))).to.equal(0o600)
    } finally {
      await server.stop()
      removeDir(dataDir)
    }
  })

  it('writes backups owner-only: folder 0700, data.mdb 0600', async () => {
    const server = await startBeacon()
    const dir = tempDir()
    try {
      const tenant = await createTenant(server.url)
      expect((await post(server.url, '/visitors/attributes', { account: tenant.account, token: tenant.token, visitorId: visitorId(), attributes: { plan: 'gold' } })).status).to.equal(200)
      const out = join(dir, 'copy')
      const run = await beacon(['backup', '--out', out], { BEACON_DATA_DIR: server.dataDir })
      expect(run.code, run.stderr).to.equal(0)
      expect(mode(out)).to.equal(0o700)
      expect(mode(join(out, 'data.mdb'))).to.equal(0o600)
    } finally {
      await server.stop()
      removeDir(server.dataDir)
      removeDir(dir)
    }
  })
})
