import { expect } from 'chai'
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { createServer, type AddressInfo } from 'node:net'
import { spawn } from 'node:child_process'
import { beacon, CLI } from '../helpers/cli.js'
import { ADMIN_KEY, admin, createTenant, removeDir, startBeacon, tempDir, visitorId, post, type BeaconProcess } from '../helpers/beacon.js'

/** A port nothing listens on (one the OS just handed out and that was closed again). */
async function closedPort (): Promise<number> {
  const server = createServer()
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  await new Promise(resolve => server.close(resolve))
  return port
}

describe('beacon (CLI)', () => {
  describe('command line', () => {
    it('prints the commands with help (exit 0), and with no command (exit 2)', async () => {
      const help = await beacon(['help'])
      expect(help.code).to.equal(0)
      for (const command of ['start', 'admin-key', 'backup', 'accounts create', 'tokens create', 'tokens list', 'tokens revoke', 'users add', 'export', 'import']) {
        expect(help.stdout).to.include(command)
      }
      expect((await beacon([])).code).to.equal(2)
    })

    it('refuses an unknown command, an unknown option and a missing option with exit 2 and a clear message', async () => {
      const unknown = await beacon(['launch'])
      expect(unknown.code).to.equal(2)
      expect(unknown.stderr).to.include('unknown command "launch"')
      const group = await beacon(['tokens'])
      expect(group.code).to.equal(2)
      expect(group.stderr).to.include('"tokens" needs a subcommand: tokens create, tokens list, tokens revoke')
      const option = await beacon(['accounts', 'create', '--name', 'x', '--colour', 'red'], { BEACON_ADMIN_KEY: ADMIN_KEY })
      expect(option.code).to.equal(2)
      expect(option.stderr).to.include("Unknown option '--colour'")
      const missing = await beacon(['tokens', 'list'], { BEACON_ADMIN_KEY: ADMIN_KEY })
      expect(missing.code).to.equal(2)
      expect(missing.stderr).to.include('tokens list: --account is required')
    })

    it('says how to give an admin key when it has none (exit 2)', async () => {
      const run = await beacon(['accounts', 'list'], { BEACON_DATA_DIR: '/nonexistent-beacon-dir' })
      expect(run.code).to.equal(2)
      expect(run.stderr).to.include('no admin key: pass --admin-key, set BEACON_ADMIN_KEY')
    })

    it('says Beacon cannot be reached when nothing listens (exit 1)', async () => {
      const port = await closedPort()
      const run = await beacon(['accounts', 'list', '--url', `http://127.0.0.1:${port}`], { BEACON_ADMIN_KEY: ADMIN_KEY })
      expect(run.code).to.equal(1)
      expect(run.stderr).to.include(`cannot reach Beacon at http://127.0.0.1:${port}`)
      expect(run.stderr).to.include('ECONNREFUSED')
    })
  })

  describe('finding the server', () => {
    it('finds a server started with BEACON_PORT from the same BEACON_PORT (and BEACON_HOST), with no --url nor BEACON_URL', async () => {
      const port = await closedPort()
      const server = await startBeacon({ env: { BEACON_PORT: String(port) } })
      try {
        expect(server.port).to.equal(port)
        const run = await beacon(['accounts', 'list'], { BEACON_PORT: String(port), BEACON_ADMIN_KEY: ADMIN_KEY })
        expect(run.code, run.stderr).to.equal(0)
        expect(JSON.parse(run.stdout)).to.deep.equal({ accounts: [] })
        // A server listening on every interface (BEACON_HOST=0.0.0.0) is reached on loopback.
        const everywhere = await beacon(['accounts', 'list'], { BEACON_HOST: '0.0.0.0', BEACON_PORT: String(port), BEACON_ADMIN_KEY: ADMIN_KEY })
        expect(everywhere.code, everywhere.stderr).to.equal(0)
        // BEACON_URL, then --url, win over the port.
        const other = await closedPort()
        const byUrl = await beacon(['accounts', 'list'], { BEACON_URL: server.url, BEACON_PORT: String(other), BEACON_ADMIN_KEY: ADMIN_KEY })
        expect(byUrl.code, byUrl.stderr).to.equal(0)
        const byOption = await beacon(['accounts', 'list', '--url', `http://127.0.0.1:${other}`], { BEACON_PORT: String(port), BEACON_ADMIN_KEY: ADMIN_KEY })
        expect(byOption.code).to.equal(1)
        expect(byOption.stderr).to.include(`cannot reach Beacon at http://127.0.0.1:${other}`)
      } finally {
        await server.stop()
        removeDir(server.dataDir)
      }
    })

    it('says what to do when BEACON_PORT cannot name the server: 0 (any free port) or not a port (exit 2)', async () => {
      const zero = await beacon(['accounts', 'list'], { BEACON_PORT: '0', BEACON_ADMIN_KEY: ADMIN_KEY })
      expect(zero.code).to.equal(2)
      expect(zero.stderr).to.include('BEACON_PORT=0 lets the server pick a free port')
      const bad = await beacon(['accounts', 'list'], { BEACON_PORT: 'eighty', BEACON_ADMIN_KEY: ADMIN_KEY })
      expect(bad.code).to.equal(2)
      expect(bad.stderr).to.include('BEACON_PORT="eighty": expected a whole number from 0 to 65535')
    })
  })

  describe('import on a server that refuses private webhook targets', () => {
    it('stops at a refusal only the server can make, naming the item and what was imported before it (exit 1)', async () => {
      // BEACON_WEBHOOK_ALLOW_PRIVATE is the server's: the check before writing cannot know it.
      const server = await startBeacon()
      const dir = tempDir()
      try {
        const target = await createTenant(server.url, 'Private target')
        const file = join(dir, 'private.json')
        writeFileSync(file, JSON.stringify({
          eventTypes: [{ name: 'signup', required: [] }],
          webhooks: [{
            id: 'local', name: 'Local', enabled: true, trigger: { kind: 'event', events: ['signup'] },
            request: { method: 'POST', url: 'http://127.0.0.1:9/in' }, delivery: { mode: 'async', timeoutMs: 1000, batchSize: 1 },
          }],
        }))
        const run = await beacon(['import', '--account', target.account, '--file', file], { BEACON_URL: server.url, BEACON_ADMIN_KEY: ADMIN_KEY })
        expect(run.code).to.equal(1)
        expect(run.stderr).to.include('import stopped at webhook "local" (after importing 1 event type, 0 segments, 0 campaigns, 0 webhooks, 0 destinations)')
        expect(run.stderr).to.include('400')
      } finally {
        removeDir(dir)
        await server.stop()
        removeDir(server.dataDir)
      }
    })
  })

  describe('admin-key', () => {
    it('prints the key file, rotates it to a new 0600 file and says a restart is needed', async () => {
      const dataDir = tempDir()
      try {
        const none = await beacon(['admin-key'], { BEACON_DATA_DIR: dataDir })
        expect(none.code).to.equal(1)
        expect(none.stderr).to.include('no admin key yet')
        const rotated = await beacon(['admin-key', '--rotate'], { BEACON_DATA_DIR: dataDir })
        expect(rotated.code).to.equal(0)
        const key = rotated.stdout.trim()
        expect(key).to.match(/^[A-Za-z0-9_-]{32}$/)
        expect(rotated.stderr).to.include('restarted')
        const file = join(dataDir, 'admin.key')
        expect(readFileSync(file, 'utf8').trim()).to.equal(key)
        expect(statSync(file).mode & 0o777).to.equal(0o600)
        const printed = await beacon(['admin-key'], { BEACON_DATA_DIR: dataDir })
        expect(printed).to.include({ code: 0, stdout: key + '\n' })
        const again = await beacon(['admin-key', '--rotate'], { BEACON_DATA_DIR: dataDir })
        expect(again.stdout.trim()).not.to.equal(key)
        expect(statSync(file).mode & 0o777).to.equal(0o600)
      } finally {
        removeDir(dataDir)
      }
    })

    it('explains that the key comes from the environment when BEACON_ADMIN_KEY is set (exit 1, file untouched)', async () => {
      const dataDir = tempDir()
      try {
        const run = await beacon(['admin-key', '--rotate'], { BEACON_DATA_DIR: dataDir, BEACON_ADMIN_KEY: ADMIN_KEY })
        expect(run.code).to.equal(1)
        expect(run.stderr).to.include('comes from the environment (BEACON_ADMIN_KEY)')
        expect(run.stdout + run.stderr).not.to.include(ADMIN_KEY)
        expect(existsSync(join(dataDir, 'admin.key'))).to.equal(false)
      } finally {
        removeDir(dataDir)
      }
    })

    it('gives a running server\'s key file to the admin commands when no key is passed', async () => {
      const server = await startBeacon({ env: { BEACON_ADMIN_KEY: '' } })
      try {
        const run = await beacon(['accounts', 'list', '--url', server.url], { BEACON_DATA_DIR: server.dataDir })
        expect(run.code).to.equal(0)
        expect(JSON.parse(run.stdout)).to.deep.equal({ accounts: [] })
      } finally {
        await server.stop()
        removeDir(server.dataDir)
      }
    })
  })

  describe('against a running server', () => {
    let server: BeaconProcess
    let env: Record<string, string>

    before(async () => {
      server = await startBeacon({ env: { BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' } })
      env = { BEACON_URL: server.url, BEACON_ADMIN_KEY: ADMIN_KEY }
    })

    after(async () => {
      await server.stop()
      removeDir(server.dataDir)
    })

    it('accounts create and list', async () => {
      const created = await beacon(['accounts', 'create', '--name', 'Shop from the CLI'], env)
      expect(created.code).to.equal(0)
      const account = JSON.parse(created.stdout) as { account: string, name: string }
      expect(account.name).to.equal('Shop from the CLI')
      const listed = await beacon(['accounts', 'list'], env)
      expect(JSON.parse(listed.stdout).accounts.map((a: { account: string }) => a.account)).to.include(account.account)
    })

    it('users add creates a panel user and prints a generated password once, which signs in; a bad --role is a usage error', async () => {
      const { account } = (await admin(server.url, 'POST', '/admin/accounts', { name: 'Users' })).body as { account: string }
      const added = await beacon(['users', 'add', '--account', account, '--email', 'cli@example.com', '--role', 'owner', '--name', 'Cli'], env)
      expect(added.code).to.equal(0)
      const user = JSON.parse(added.stdout) as { id: string, email: string, role: string, password: string }
      expect(user).to.include({ email: 'cli@example.com', role: 'owner' })
      expect(user.password).to.have.length.at.least(12)
      const signIn = await post(server.url, '/admin/session', { email: 'cli@example.com', password: user.password })
      expect(signIn.status).to.equal(200)
      const listed = await admin(server.url, 'GET', `/admin/accounts/${account}/users`)
      expect(JSON.stringify(listed.body)).not.to.include(user.password)
      const role = await beacon(['users', 'add', '--account', account, '--email', 'x@example.com', '--role', 'boss'], env)
      expect(role.code).to.equal(2)
      expect(role.stderr).to.include('--role: expected one of viewer, editor, owner')
    })

    it('tokens create, list and revoke; the created token works until revoked', async () => {
      const { account } = (await admin(server.url, 'POST', '/admin/accounts', { name: 'Tokens' })).body as { account: string }
      const created = await beacon(['tokens', 'create', '--account', account, '--name', 'web', '--attributes', 'plan, color', '--access', 'read-write', '--rate', '50'], env)
      expect(created.code).to.equal(0)
      const token = JSON.parse(created.stdout) as { id: string, token: string, attributes: string[], ratePerSecond: number }
      expect(token).to.include({ ratePerSecond: 50 })
      expect(token.attributes).to.deep.equal(['plan', 'color'])
      const write = (): Promise<number> => post(server.url, '/visitors/attributes', { account, token: token.token, visitorId: visitorId(), attributes: { plan: 'pro' } }).then(r => r.status)
      expect(await write()).to.equal(200)
      const listed = await beacon(['tokens', 'list', '--account', account], env)
      expect(listed.code).to.equal(0)
      expect(listed.stdout).not.to.include(token.token)
      expect(JSON.parse(listed.stdout).tokens.map((t: { id: string }) => t.id)).to.deep.equal([token.id])
      const revoked = await beacon(['tokens', 'revoke', '--account', account, '--id', token.id], env)
      expect(revoked.code).to.equal(0)
      expect(JSON.parse(revoked.stdout).revokedAt).to.be.a('string')
      expect(await write()).to.equal(401)
    })

    it('tokens: a bad --access or --rate is a usage error (2); a refusal prints the server\'s error (1)', async () => {
      const { account } = (await admin(server.url, 'POST', '/admin/accounts', { name: 'Refusals' })).body as { account: string }
      const access = await beacon(['tokens', 'create', '--account', account, '--name', 'x', '--attributes', '*', '--access', 'admin'], env)
      expect(access.code).to.equal(2)
      expect(access.stderr).to.include('--access: expected one of read, write, read-write')
      const rate = await beacon(['tokens', 'create', '--account', account, '--name', 'x', '--attributes', '*', '--access', 'read', '--rate', 'fast'], env)
      expect(rate.code).to.equal(2)
      const refused = await beacon(['tokens', 'create', '--account', account, '--name', 'x', '--attributes', 'bad name', '--access', 'read'], env)
      expect(refused.code).to.equal(1)
      expect(refused.stderr).to.include('the server refused POST')
      expect(refused.stderr).to.include('invalid_field /attributes/0')
      const unknown = await beacon(['tokens', 'revoke', '--account', account, '--id', 'nope'], env)
      expect(unknown.code).to.equal(1)
      expect(unknown.stderr).to.include('404 token_not_found')
      const wrongKey = await beacon(['accounts', 'list', '--admin-key', 'not-the-key-0123456789'], env)
      expect(wrongKey.code).to.equal(1)
      expect(wrongKey.stderr).to.include('401 admin_unauthorized')
    })

    it('export writes the account\'s configuration; import recreates it in another account', async () => {
      const source = await createTenant(server.url, 'Source')
      const base = `/admin/accounts/${source.account}`
      const settings = { allowedOrigins: ['https://shop.example', 'https://*.shop.example'], identityVerification: 'off', allowBrowserTokens: true, requireConsent: true, rateLimit: { perSecond: 50, burst: 100 } }
      expect((await admin(server.url, 'PATCH', base, settings)).status).to.equal(200)
      expect((await admin(server.url, 'PUT', `${base}/event-types/signup`, { required: ['plan'] })).status).to.equal(200)
      expect((await admin(server.url, 'PUT', `${base}/segments/vip`, { description: 'manual' })).status).to.equal(200)
      expect((await admin(server.url, 'PUT', `${base}/segments/browsers`, { rule: { fact: 'count', event: 'productView', within: '7d', op: 'gte', value: 3 } })).status).to.equal(200)
      expect((await admin(server.url, 'PUT', `${base}/campaigns/summer`, {
        name: 'Summer', status: 'active', priority: 5, trigger: { events: ['signup'] }, rule: { fact: 'segment', op: 'contains', value: 'vip' }, content: { banner: 'a.png' },
      })).status).to.equal(200)
      expect((await admin(server.url, 'PUT', `${base}/webhooks/crm`, {
        name: 'CRM', enabled: false, trigger: { kind: 'event', events: ['signup'] },
        request: { method: 'POST', url: 'http://127.0.0.1:9/in' }, delivery: { mode: 'async', timeoutMs: 1000, batchSize: 1 },
      })).status).to.equal(200)
      expect((await admin(server.url, 'PUT', `${base}/destinations/meta`, {
        type: 'meta-capi', name: 'Meta', enabled: true, events: ['signup'], credentials: { accessToken: 'meta-secret-token' },
        settings: { pixelId: '123', apiBaseUrl: 'http://127.0.0.1:9' },
      })).status).to.equal(200)

      const dir = tempDir()
      try {
        const file = join(dir, 'export.json')
        const exported = await beacon(['export', '--account', source.account, '--out', file], env)
        expect(exported.code).to.equal(0)
        expect(exported.stderr).to.include('1 event type, 2 segments, 1 campaign, 1 webhook, 1 destination')
        const doc = JSON.parse(readFileSync(file, 'utf8'))
        expect(doc.beacon.format).to.equal(1)
        expect(doc.account).to.deep.equal({ account: source.account, name: 'Source' })
        expect(doc.settings).to.deep.equal(settings)
        expect(doc.eventTypes).to.deep.equal([{ name: 'signup', required: ['plan'] }])
        expect(doc.segments.map((s: { name: string }) => s.name).sort()).to.deep.equal(['browsers', 'vip'])
        // Member counts are state, not configuration.
        for (const item of doc.segments) expect(item).not.to.have.property('members')
        expect(doc.campaigns[0]).to.include({ id: 'summer', priority: 5 })
        expect(doc.webhooks[0]).to.include({ id: 'crm', enabled: false })
        // Destinations leave without their credentials (never returned) nor their state.
        expect(doc.destinations).to.deep.equal([{
          id: 'meta', type: 'meta-capi', name: 'Meta', enabled: true, events: ['signup'], audiences: [], purpose: 'ads', settings: { pixelId: '123', apiBaseUrl: 'http://127.0.0.1:9' },
        }])
        expect(readFileSync(file, 'utf8')).not.to.include('meta-secret-token')
        // Without --out, the same document on stdout.
        const printed = await beacon(['export', '--account', source.account], env)
        expect({ ...JSON.parse(printed.stdout), exportedAt: null }).to.deep.equal({ ...doc, exportedAt: null })

        const target = await createTenant(server.url, 'Target')
        const imported = await beacon(['import', '--account', target.account, '--file', file], env)
        expect(imported.code, imported.stderr).to.equal(0)
        expect(imported.stdout).to.include(`Imported into ${target.account}: 1 event type, 2 segments, 1 campaign, 1 webhook, 1 destination.`)
        expect(imported.stdout).to.include('Imported disabled (credentials are never exported; enter them and enable each): meta.')
        const copy = JSON.parse((await beacon(['export', '--account', target.account], env)).stdout)
        for (const key of ['settings', 'eventTypes', 'segments', 'campaigns', 'webhooks']) expect(copy[key], key).to.deep.equal(doc[key])
        expect(copy.destinations).to.deep.equal([{ ...doc.destinations[0], enabled: false }])
        // The imported configuration is live: the campaign answers the custom event.
        await post(server.url, '/visitors/segments', { account: target.account, token: target.token, visitorId: '2b7e1b8e-7c0e-4c7e-9a4e-1b2c3d4e5f60', assignees: ['vip'] })
        const answer = await post(server.url, '/campaigns/query', { account: target.account, visitorId: '2b7e1b8e-7c0e-4c7e-9a4e-1b2c3d4e5f60', platform: 'web', event: 'signup', plan: 'pro' })
        expect(answer.body.campaigns.map((c: { id: string }) => c.id)).to.deep.equal(['summer'])
      } finally {
        removeDir(dir)
      }
    })

    it('import checks the whole file first: every problem at once, with its item and field, and nothing written (exit 1)', async () => {
      const target = await createTenant(server.url, 'Bad import')
      const base = `/admin/accounts/${target.account}`
      const dir = tempDir()
      const snapshot = async () => JSON.parse((await beacon(['export', '--account', target.account], env)).stdout)
      try {
        const before = await snapshot()
        const file = join(dir, 'bad.json')
        writeFileSync(file, JSON.stringify({
          settings: { allowedOrigins: ['https://shop.example'] },
          eventTypes: [{ name: 'signup', required: [] }],
          segments: [{ name: 'vip', description: 'manual' }],
          campaigns: [
            { id: 'ok', name: 'Fine', status: 'active', priority: 1, trigger: { events: ['signup'] }, content: {} },
            { id: 'broken', name: 'Broken', status: 'sometimes', priority: 1, trigger: {}, content: {} },
            { id: 'unknown-event', name: 'Unknown', status: 'active', priority: 1, trigger: { events: ['neverDefined'] }, content: {} },
          ],
          // Redacted secrets, as an export of another account carries them: this account keeps none.
          webhooks: [{
            id: 'crm', name: 'CRM', enabled: false, trigger: { kind: 'event', events: ['purchase'] },
            request: { method: 'POST', url: 'http://127.0.0.1:9/in', auth: { type: 'bearer', token: '[redacted]' } }, delivery: { mode: 'async', timeoutMs: 1000, batchSize: 1 },
          }],
        }))
        const run = await beacon(['import', '--account', target.account, '--file', file], env)
        expect(run.code).to.equal(1)
        expect(run.stderr).to.include(`${file}: nothing imported: 3 problems to fix first:`)
        expect(run.stderr).to.match(/campaign "broken" \/status: invalid_campaign/)
        expect(run.stderr).to.include('campaign "unknown-event" /trigger/events/0: unknown_event_type')
        expect(run.stderr).to.include('webhook "crm" /request/auth/token: invalid_field: [redacted] is what GET shows for a secret')
        expect(run.stderr).not.to.include('"ok"')
        // Not even the settings, the event type or the valid items were written.
        expect({ ...(await snapshot()), exportedAt: null }).to.deep.equal({ ...before, exportedAt: null })

        // Into the account that keeps the secret, the same webhook imports (the secret kept) ...
        const secret = { method: 'POST', url: 'http://127.0.0.1:9/in', auth: { type: 'bearer', token: 'crm-secret' } }
        expect((await admin(server.url, 'PUT', `${base}/webhooks/crm`, { name: 'CRM', enabled: false, trigger: { kind: 'event', events: ['purchase'] }, request: secret, delivery: { mode: 'async', timeoutMs: 1000, batchSize: 1 } })).status).to.equal(200)
        const exported = join(dir, 'own.json')
        expect((await beacon(['export', '--account', target.account, '--out', exported], env)).code).to.equal(0)
        const own = await beacon(['import', '--account', target.account, '--file', exported], env)
        expect(own.code, own.stderr).to.equal(0)
        // ... but not pointed elsewhere: the kept secret only goes where it was entered for.
        const moved = JSON.parse(readFileSync(exported, 'utf8'))
        moved.webhooks[0].request.url = 'http://127.0.0.2:9/in'
        moved.segments = [{ name: 'late', description: 'would come before the webhook' }]
        writeFileSync(exported, JSON.stringify(moved))
        const elsewhere = await beacon(['import', '--account', target.account, '--file', exported], env)
        expect(elsewhere.code).to.equal(1)
        expect(elsewhere.stderr).to.include('webhook "crm" /request/auth/token: invalid_field: token was kept from the saved configuration')
        expect((await admin(server.url, 'GET', `${base}/segments/late`)).status).to.equal(404)

        const garbage = join(dir, 'garbage.json')
        writeFileSync(garbage, '{"campaigns": {}}')
        const bad = await beacon(['import', '--account', target.account, '--file', garbage], env)
        expect(bad.code).to.equal(1)
        expect(bad.stderr).to.include('"campaigns" must be a list')
        const missing = await beacon(['import', '--account', target.account, '--file', join(dir, 'nope.json')], env)
        expect(missing.code).to.equal(1)
        expect(missing.stderr).to.include('cannot read')
        const account = await beacon(['import', '--account', '00000000-0000-4000-8000-000000000000', '--file', file], env)
        expect(account.code).to.equal(1)
        expect(account.stderr).to.include('404 account_not_found')
      } finally {
        removeDir(dir)
      }
    })

    it('backup copies a consistent database while the server runs; a server started on the copy has the data', async () => {
      const tenant = await createTenant(server.url, 'Backed up')
      const visitor = visitorId()
      expect((await post(server.url, '/visitors/attributes', { account: tenant.account, token: tenant.token, visitorId: visitor, attributes: { plan: 'gold' } })).status).to.equal(200)
      const dir = tempDir()
      const out = join(dir, 'copy')
      try {
        const run = await beacon(['backup', '--out', out], { BEACON_DATA_DIR: server.dataDir })
        expect(run.code, run.stderr).to.equal(0)
        expect(run.stderr).to.include('Backed up')
        const again = await beacon(['backup', '--out', out], { BEACON_DATA_DIR: server.dataDir })
        expect(again.code).to.equal(1)
        expect(again.stderr).to.include('already exists')
        // The backup holds the database only: its sealed secrets open with the key kept apart (docs: Backups).
        const restored = await startBeacon({ dataDir: out, env: { BEACON_SECRETS_KEY: readFileSync(join(server.dataDir, 'secrets.key'), 'utf8').trim() } })
        try {
          const q = await post(restored.url, '/visitors/query', { account: tenant.account, token: tenant.token, visitorId: visitor })
          expect(q.body.attributes).to.deep.equal({ plan: [{ value: 'gold' }] })
        } finally {
          await restored.stop()
        }
        mkdirSync(join(dir, 'empty'))
        const nothing = await beacon(['backup', '--out', join(dir, 'x')], { BEACON_DATA_DIR: join(dir, 'empty') })
        expect(nothing.code).to.equal(1)
        expect(nothing.stderr).to.include('no database in')
      } finally {
        removeDir(dir)
      }
    })
  })

  describe('start', () => {
    it('starts the server like node dist/src/main.js and stops it on SIGTERM with exit 0', async () => {
      const dataDir = tempDir()
      const child = spawn(process.execPath, [CLI, 'start'], {
        env: { PATH: process.env.PATH ?? '', BEACON_HOST: '127.0.0.1', BEACON_PORT: '0', BEACON_DATA_DIR: dataDir, BEACON_ADMIN_KEY: ADMIN_KEY },
        stdio: ['ignore', 'pipe', 'pipe'],
      })
      try {
        let output = ''
        const port = await new Promise<number>((resolve, reject) => {
          const timer = setTimeout(() => reject(new Error(`no start within 15 s: ${output}`)), 15_000)
          child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
            output += chunk
            const match = /"port":(\d+),[^\n]*"msg":"beacon started"/.exec(output)
            if (match !== null) {
              clearTimeout(timer)
              resolve(Number(match[1]))
            }
          })
        })
        expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).to.equal(200)
        const exited = new Promise<number | null>(resolve => child.once('exit', resolve))
        child.kill('SIGTERM')
        expect(await exited).to.equal(0)
      } finally {
        if (child.exitCode === null) child.kill('SIGKILL')
        removeDir(dataDir)
      }
    })
  })
})
