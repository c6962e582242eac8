import { expect } from 'chai'
import { spawnSync } from 'node:child_process'
import { readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { open } from 'lmdb'
import { Webhook } from 'standardwebhooks'
import { ADMIN_KEY, admin, createTenant, identified, post, removeDir, startBeacon, tempDir, visitorId, type Tenant } from '../helpers/beacon.js'
import { beacon } from '../helpers/cli.js'
import { SECRET, startReceiver, type Receiver } from '../webhooks/helpers.js'
import { until } from '../helpers/until.js'

const MAIN = new URL('../../dist/src/main.js', import.meta.url).pathname
const PASSWORD = 'pw-' + 'Q'.repeat(24)
const API_KEY = 'ak-' + 'Z'.repeat(24)
const ALLOW = { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' }

function hookBody (url: string): Record<string, unknown> {
  return {
    name: 'orders', enabled: true, trigger: { kind: 'event', events: ['purchase'] },
    request: { method: 'POST', url, auth: { type: 'basic', username: 'svc', password: PASSWORD }, headers: { 'X-Api-Key': API_KEY }, signingSecret: SECRET },
    delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1 },
  }
}

/** Send a purchase and check the receiver got it with every secret as configured. */
async function deliversWithSecrets (base: string, tenant: Tenant, receiver: Receiver): Promise<void> {
  const before = receiver.requests.length
  expect((await post(base, '/campaigns/query', { account: tenant.account, visitorId: visitorId(), platform: 'web', event: 'purchase', orderId: 'o-' + before })).status).to.equal(200)
  await until('a delivery', () => receiver.requests.length > before)
  const got = receiver.requests[before]!
  expect(got.headers.authorization).to.equal('Basic ' + Buffer.from(`svc:${PASSWORD}`).toString('base64'))
  expect(got.headers['x-api-key']).to.equal(API_KEY)
  new Webhook(SECRET).verify(got.body, got.headers as Record<string, string>)
}

function fileHas (file: string, text: string): boolean {
  return readFileSync(file).includes(Buffer.from(text))
}

/** The stored configuration row of a webhook, read with lmdb directly (the server stopped). */
async function storedRow (dataDir: string, account: string, id: string): Promise<any> {
  const root = open({ path: dataDir, readOnly: true })
  try {
    return root.openDB('config', {}).get([account, 'webhook', id])
  } finally {
    await root.close()
  }
}

describe('webhook secrets at rest', () => {
  let receiver: Receiver
  beforeEach(async () => { receiver = await startReceiver() })
  afterEach(async () => { await receiver.close() })

  it('never writes a password, credential header or signing secret in clear into data.mdb, and uses them after a restart', async () => {
    const dataDir = tempDir()
    try {
      let server = await startBeacon({ dataDir, env: ALLOW })
      const tenant = await createTenant(server.url)
      expect((await admin(server.url, 'PUT', `/admin/accounts/${tenant.account}/webhooks/orders`, hookBody(`${receiver.url}/in`))).status).to.equal(200)
      await deliversWithSecrets(server.url, tenant, receiver)
      await server.stop()
      const data = join(dataDir, 'data.mdb')
      for (const secret of [PASSWORD, API_KEY, SECRET, SECRET.slice(6)]) expect(fileHas(data, secret), secret).to.equal(false)
      expect(statSync(join(dataDir, 'secrets.key')).mode & 0o777).to.equal(0o600)
      const row = await storedRow(dataDir, tenant.account, 'orders')
      expect(row.request.auth.password).to.match(/^beacon-sealed:v1:[0-9a-f]{8}:/)
      server = await startBeacon({ dataDir, env: ALLOW })
      await deliversWithSecrets(server.url, tenant, receiver)
      // GET still redacts; a PUT of what GET gave keeps the secrets.
      const got = await admin(server.url, 'GET', `/admin/accounts/${tenant.account}/webhooks/orders`)
      expect(got.body.request.auth.password).to.equal('[redacted]')
      const { id: _id, ...again } = got.body
      expect((await admin(server.url, 'PUT', `/admin/accounts/${tenant.account}/webhooks/orders`, again)).status).to.equal(200)
      await deliversWithSecrets(server.url, tenant, receiver)
      await server.stop()
    } finally {
      removeDir(dataDir)
    }
  })

  it('reads plain values written by an earlier release and seals them at start', async () => {
    const dataDir = tempDir()
    try {
      let server = await startBeacon({ dataDir, env: ALLOW })
      const tenant = await createTenant(server.url)
      await server.stop()
      // As an earlier release stored it: the configuration as validated, secrets in clear.
      const root = open({ path: dataDir })
      await root.openDB('config', {}).put([tenant.account, 'webhook', 'orders'], hookBody(`${receiver.url}/in`))
      await root.close()
      server = await startBeacon({ dataDir, env: ALLOW })
      await deliversWithSecrets(server.url, tenant, receiver)
      await server.stop()
      const row = await storedRow(dataDir, tenant.account, 'orders')
      expect(JSON.stringify(row)).not.to.include(PASSWORD)
      expect(row.request.signingSecret).to.match(/^beacon-sealed:v1:/)
      expect(row.request.headers['X-Api-Key']).to.match(/^beacon-sealed:v1:/)
    } finally {
      removeDir(dataDir)
    }
  })

  it('rotates the key file with "beacon secrets rotate" (refused while Beacon runs), old values sealed again', async () => {
    const dataDir = tempDir()
    const env = { BEACON_DATA_DIR: dataDir }
    try {
      let server = await startBeacon({ dataDir, env: ALLOW })
      const tenant = await createTenant(server.url)
      expect((await admin(server.url, 'PUT', `/admin/accounts/${tenant.account}/webhooks/orders`, hookBody(`${receiver.url}/in`))).status).to.equal(200)
      const busy = await beacon(['secrets', 'rotate'], env)
      expect(busy.code).to.equal(1)
      expect(busy.stderr).to.include(`PID ${server.child.pid}`)
      expect(busy.stderr).to.include('Stop Beacon before rotating')
      await server.stop()
      const oldKey = readFileSync(join(dataDir, 'secrets.key'), 'utf8')
      const oldSealed = (await storedRow(dataDir, tenant.account, 'orders')).request.auth.password as string
      const run = await beacon(['secrets', 'rotate'], env)
      expect(run.code, run.stderr).to.equal(0)
      expect(run.stderr).to.include('Sealed the secrets of 2 record(s)')
      const newKey = readFileSync(join(dataDir, 'secrets.key'), 'utf8')
      expect(newKey).not.to.equal(oldKey)
      expect(newKey.trim().split('\n')).to.have.length(1)
      expect(statSync(join(dataDir, 'secrets.key')).mode & 0o777).to.equal(0o600)
      const newSealed = (await storedRow(dataDir, tenant.account, 'orders')).request.auth.password as string
      expect(newSealed.split(':')[2]).not.to.equal(oldSealed.split(':')[2])
      server = await startBeacon({ dataDir, env: ALLOW })
      await deliversWithSecrets(server.url, tenant, receiver)
      await server.stop()
    } finally {
      removeDir(dataDir)
    }
  })

  it('takes keys from BEACON_SECRETS_KEY, rotates through "<new>,<old>", and refuses to start without the key that sealed', async () => {
    const dataDir = tempDir()
    const keyA = Buffer.alloc(32, 1).toString('base64')
    const keyB = Buffer.alloc(32, 2).toString('base64')
    try {
      let server = await startBeacon({ dataDir, env: { ...ALLOW, BEACON_SECRETS_KEY: keyA } })
      const tenant = await createTenant(server.url)
      expect((await admin(server.url, 'PUT', `/admin/accounts/${tenant.account}/webhooks/orders`, hookBody(`${receiver.url}/in`))).status).to.equal(200)
      await server.stop()
      server = await startBeacon({ dataDir, env: { ...ALLOW, BEACON_SECRETS_KEY: `${keyB},${keyA}` } })
      await deliversWithSecrets(server.url, tenant, receiver)
      await server.stop()
      server = await startBeacon({ dataDir, env: { ...ALLOW, BEACON_SECRETS_KEY: keyB } })
      await deliversWithSecrets(server.url, tenant, receiver)
      await server.stop()
      const wrong = spawnSync(process.execPath, [MAIN], {
        env: { PATH: process.env.PATH ?? '', BEACON_PORT: '0', BEACON_HOST: '127.0.0.1', BEACON_DATA_DIR: dataDir, BEACON_ADMIN_KEY: ADMIN_KEY, BEACON_SECRETS_KEY: keyA },
        encoding: 'utf8', timeout: 15_000, killSignal: 'SIGKILL',
      })
      expect(wrong.status).to.equal(1)
      expect(wrong.stderr.trim().split('\n')).to.have.length(1)
      expect(wrong.stderr).to.include('which is not configured')
      const bad = spawnSync(process.execPath, [MAIN], {
        env: { PATH: process.env.PATH ?? '', BEACON_DATA_DIR: dataDir, BEACON_SECRETS_KEY: 'short' }, encoding: 'utf8', timeout: 15_000,
      })
      expect(bad.status).to.equal(1)
      expect(bad.stderr).to.include('BEACON_SECRETS_KEY: entry 1 is not the base64 of 32 bytes')
    } finally {
      removeDir(dataDir)
    }
  })
})

describe('identity secrets at rest', () => {
  /** A signed profileId is accepted (200) and an unsigned one refused (401): the secret works. */
  async function verifies (base: string, tenant: Tenant): Promise<void> {
    const event = { account: tenant.account, visitorId: visitorId(), platform: 'web', event: 'pageView' }
    expect((await post(base, '/campaigns/query', { ...event, ...identified(tenant, 'ana@example.com') })).status).to.equal(200)
    expect((await post(base, '/campaigns/query', { ...event, profileId: 'ana@example.com' })).status).to.equal(401)
  }

  async function storedAccount (dataDir: string, account: string): Promise<any> {
    const root = open({ path: dataDir, readOnly: true })
    try {
      return root.openDB('accounts', {}).get(account)
    } finally {
      await root.close()
    }
  }

  it('never writes an account\'s identity secret in clear, and verifies with it after a restart', async () => {
    const dataDir = tempDir()
    try {
      let server = await startBeacon({ dataDir })
      const tenant = await createTenant(server.url)
      await verifies(server.url, tenant)
      await server.stop()
      expect(fileHas(join(dataDir, 'data.mdb'), tenant.identitySecret)).to.equal(false)
      expect((await storedAccount(dataDir, tenant.account)).identitySecrets.current).to.match(/^beacon-sealed:v1:/)
      server = await startBeacon({ dataDir })
      await verifies(server.url, tenant)
      await server.stop()
    } finally {
      removeDir(dataDir)
    }
  })

  it('reads an identity secret an earlier release stored in clear, and seals it at start', async () => {
    const dataDir = tempDir()
    try {
      let server = await startBeacon({ dataDir })
      const tenant = await createTenant(server.url)
      await server.stop()
      const root = open({ path: dataDir })
      const accounts = root.openDB('accounts', {})
      const row = accounts.get(tenant.account)
      await accounts.put(tenant.account, { ...row, identitySecrets: { ...row.identitySecrets, current: tenant.identitySecret } })
      await root.close()
      server = await startBeacon({ dataDir })
      await verifies(server.url, tenant)
      await server.stop()
      expect((await storedAccount(dataDir, tenant.account)).identitySecrets.current).to.match(/^beacon-sealed:v1:/)
    } finally {
      removeDir(dataDir)
    }
  })
})
