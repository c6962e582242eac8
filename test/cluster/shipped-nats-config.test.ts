// The shipped NATS configuration (deploy/nats-cluster.conf) as an operator runs it: 3 nats-servers
// started from the file itself (only its ports and store dir replaced by the harness's, its secrets
// given through the environment as docker-compose.cluster.yml does), and 2 Beacon nodes logging in as
// the user `beacon` (BEACON_NATS_USER, BEACON_NATS_PASSWORD). Beacon works with exactly the permissions
// the file grants (writes, forwarded reads, panel users and sessions, configuration, media, webhook
// deliveries: no server logs a permissions violation); a client without credentials, with a wrong
// password, or outside the permissions, is refused; a server without the route password does not join;
// a Beacon node without credentials refuses to start; Beacon never logs the password and does not warn
// about an unauthenticated connection. And the single-server file (deploy/nats.conf) with a Beacon in
// NATS mode delivering webhooks.

import { expect } from 'chai'
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { connect } from '@nats-io/transport-node'
import { ADMIN_KEY, admin, createTenant, post, removeDir, startBeacon, tempDir, visitorId } from '../helpers/beacon.js'
import { startBeaconCluster, type BeaconCluster } from '../helpers/beacon-cluster.js'
import { freePort, startNatsServer } from '../helpers/nats-server.js'
import { withRoutePort } from '../helpers/nats-cluster.js'
import { addUser, asUser, signIn } from '../helpers/panel.js'
import { startReceiver, type Receiver } from '../webhooks/helpers.js'
import { until } from '../helpers/until.js'

const SHIPPED = fileURLToPath(new URL('../../deploy/nats-cluster.conf', import.meta.url))
// As the docs say to make them: a letter first (nats-server reads an environment value as a value).
const BEACON_PASSWORD = `p${randomBytes(24).toString('hex')}`
const ROUTE_PASSWORD = `p${randomBytes(24).toString('hex')}`

const routesOf = (ports: number[], password: string): string => `[${ports.map(port => `nats-route://route:${password}@127.0.0.1:${port}`).join(', ')}]`

describe('the shipped NATS configuration: authenticated, least privilege (3 nats-servers, 2 Beacon nodes, real processes)', function () {
  this.timeout(180_000)
  let cluster: BeaconCluster
  let receiver: Receiver

  before(async () => {
    receiver = await startReceiver(() => ({ status: 200 }))
    cluster = await startBeaconCluster(2, {
      BEACON_NATS_USER: 'beacon', BEACON_NATS_PASSWORD: BEACON_PASSWORD, BEACON_WEBHOOK_ALLOW_PRIVATE: 'true',
    }, {
      configFile: SHIPPED,
      env: ({ name, routePorts }) => ({ NATS_SERVER_NAME: name, BEACON_NATS_PASSWORD: BEACON_PASSWORD, NATS_ROUTE_PASSWORD: ROUTE_PASSWORD, NATS_ROUTES: routesOf(routePorts, ROUTE_PASSWORD) }),
      user: 'beacon',
      pass: BEACON_PASSWORD,
    })
    await cluster.settled()
  })
  after(async () => {
    await cluster?.close()
    await receiver?.close()
  })

  const account = (): string => cluster.tenant.account
  const [one, two] = [(): string => cluster.members[0]!.url, (): string => cluster.members[1]!.url]

  it('runs Beacon with exactly the permissions it grants: writes, forwarded reads, configuration, panel, media, webhooks', async () => {
    const { token } = cluster.tenant
    // Configuration (bucket, locks), a webhook that receives every purchase.
    const hook = await admin(one(), 'PUT', `/admin/accounts/${account()}/webhooks/orders`, {
      name: 'orders', enabled: true, trigger: { kind: 'event', events: ['purchase'] },
      request: { method: 'POST', url: `${receiver.url}/orders`, payload: '{"who": "{{visitorId}}"}' },
      delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1, maxAttempts: 3 },
    })
    expect(hook.status, JSON.stringify(hook.body)).to.be.oneOf([200, 201])
    // Writes through both nodes, half of them forwarded (changelog appends, forwarding, replies).
    const visitors = Array.from({ length: 8 }, () => visitorId())
    for (const [i, id] of visitors.entries()) {
      const url = i % 2 === 0 ? one() : two()
      const res = await post(url, '/visitors/attributes', { account: account(), token, visitorId: id, attributes: { color: 'red' } })
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
      const bought = await post(url, '/campaigns/query', { account: account(), visitorId: id, platform: 'web', event: 'purchase', orderId: `o-${id}` })
      expect(bought.status, JSON.stringify(bought.body)).to.equal(200)
    }
    for (const id of visitors) {
      const res = await post(two(), '/visitors/query', { account: account(), token, visitorId: id, attributes: ['color'] })
      expect(res.status, JSON.stringify(res.body)).to.equal(200)
      expect(res.body.attributes.color).to.deep.equal([{ value: 'red' }])
    }
    // Webhook deliveries (the delivery stream, its consumer's acknowledgements).
    await until('every purchase delivered', () => receiver.requests.filter(r => r.url === '/orders').length >= visitors.length, 30_000, 20)
    // Panel users (configuration), sessions and sign-in limits (their buckets).
    await addUser(one(), account(), 'owner@shipped.example', 'owner')
    const signedIn = await signIn(two(), 'owner@shipped.example')
    expect(signedIn.status).to.equal(200)
    await until('the session accepted through node 1', async () => (await asUser(one(), signedIn.signedIn!.cookie, 'GET', '/admin/session')).status === 200, 5_000, 10)
    expect((await signIn(one(), 'owner@shipped.example', 'wrong password')).status).to.equal(401)
    // Media (the object store bucket and its locks).
    const png = Buffer.concat([Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex'), randomBytes(2000)])
    const media = await fetch(`${one()}/admin/accounts/${account()}/media?name=a.png`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'image/png' }, body: png })
    const created = await media.json() as { url: string }
    expect(media.status, JSON.stringify(created)).to.equal(201)
    expect((await fetch(two() + created.url)).status, 'the image served by node 2').to.equal(200)
    // Reports and listings from any node (calls to a named node).
    expect((await admin(two(), 'GET', `/admin/accounts/${account()}/webhooks/orders/deliveries?limit=100`)).status).to.equal(200)

    for (const [i, server] of cluster.nats.servers.entries()) {
      expect(server.output(), `nats server ${i + 1}`).not.to.match(/Violation/i)
    }
    for (const member of cluster.members) {
      const output = member.process!.output()
      expect(output, member.id).not.to.match(/[Pp]ermissions? [Vv]iolation/)
      expect(output, `${member.id} logs no password`).not.to.include(BEACON_PASSWORD)
      expect(output, `${member.id} does not warn: it authenticated`).not.to.include('without authentication')
      expect(output, `${member.id} logs how it authenticates`).to.include('"natsAccess":{"credentials":"user","tls":false}')
    }
  })

  it('refuses a client without credentials, with a wrong password, and the user beacon outside its permissions', async () => {
    const refusal = async (options: { user?: string, pass?: string }): Promise<string> =>
      await connect({ servers: cluster.nats.urls[0]!, ...options }).then(async nc => { await nc.close(); return 'connected' }, (error: Error) => error.message)
    expect(await refusal({})).to.match(/Authorization Violation/i)
    expect(await refusal({ user: 'beacon', pass: 'not the password' })).to.match(/Authorization Violation/i)
    const nc = await connect({ servers: cluster.nats.urls[0]!, user: 'beacon', pass: BEACON_PASSWORD })
    try {
      const errors: string[] = []
      void (async () => { for await (const status of nc.status()) if (status.type === 'error') errors.push(String(status.error)) })()
      nc.publish('elsewhere.subject', 'x')
      nc.subscribe('$SYS.>')
      await nc.flush()
      await until('the server refused both', () => errors.some(e => /publish/i.test(e)) && errors.some(e => /subscri/i.test(e)), 5_000, 10)
    } finally {
      await nc.close()
    }
  })

  it('keeps out a server without the route password', async () => {
    const routePort = Number(/Listening for route connections on 127\.0\.0\.1:(\d+)/.exec(cluster.nats.servers[0]!.output())![1])
    const clusterName = cluster.nats.names[0]!.replace(/-n1$/, '')
    const intruder = await startNatsServer({
      config: withRoutePort(readFileSync(SHIPPED, 'utf8'), await freePort()),
      args: ['--server_name', 'intruder', '--cluster_name', clusterName, '-m', String(await freePort())],
      env: { NATS_SERVER_NAME: 'intruder', BEACON_NATS_PASSWORD: BEACON_PASSWORD, NATS_ROUTE_PASSWORD: 'pguessed', NATS_ROUTES: routesOf([routePort], 'pguessed') },
    })
    try {
      await until('the intruder\'s route refused', () => /Route Error 'Authorization Violation'/.test(intruder.output()), 10_000, 20).catch((error: Error) => { throw new Error(`${error.message}:\n${intruder.output()}`) })
      expect(cluster.nats.servers[0]!.output()).not.to.include('intruder')
    } finally {
      await intruder.close()
    }
  })

  it('refuses to start a Beacon node without credentials, naming the refusal, never the password', async () => {
    const dataDir = tempDir()
    try {
      const { BEACON_NATS_USER: _user, BEACON_NATS_PASSWORD: _pass, ...without } = cluster.env('node-9')
      const error = await startBeacon({ dataDir, env: without }).then(async started => { await started.kill(); return null }, (e: Error) => e)
      expect(error?.message).to.match(/beacon: failed to start: cannot connect to NATS at [^\n]*Authorization Violation/i)
      const wrong = await startBeacon({ dataDir, env: { ...cluster.env('node-9'), BEACON_NATS_PASSWORD: 'pwrong-password-here' } }).then(async started => { await started.kill(); return null }, (e: Error) => e)
      expect(wrong?.message).to.match(/Authorization Violation/i)
      expect(wrong?.message).not.to.include('pwrong-password-here')
    } finally {
      removeDir(dataDir)
    }
  })
})

describe('the shipped single-server NATS configuration (deploy/nats.conf, docker-compose.yml): Beacon in NATS mode with a password', function () {
  this.timeout(120_000)

  it('delivers webhooks through JetStream with exactly the permissions it grants, and refuses a client without credentials', async () => {
    const receiver = await startReceiver(() => ({ status: 200 }))
    const nats = await startNatsServer({ config: readFileSync(fileURLToPath(new URL('../../deploy/nats.conf', import.meta.url)), 'utf8'), args: ['-m', String(await freePort())], env: { BEACON_NATS_PASSWORD: BEACON_PASSWORD } })
    const dataDir = tempDir()
    let beacon: Awaited<ReturnType<typeof startBeacon>> | null = null
    try {
      beacon = await startBeacon({ dataDir, env: { BEACON_NATS_URL: nats.url, BEACON_NATS_USER: 'beacon', BEACON_NATS_PASSWORD: BEACON_PASSWORD, BEACON_WEBHOOK_ALLOW_PRIVATE: 'true' } })
      const tenant = await createTenant(beacon.url)
      const hook = await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/webhooks/orders`, {
        name: 'orders', enabled: true, trigger: { kind: 'event', events: ['purchase'] },
        request: { method: 'POST', url: `${receiver.url}/orders`, payload: '{"who": "{{visitorId}}"}' },
        delivery: { mode: 'async', timeoutMs: 2000, batchSize: 1, maxAttempts: 3 },
      })
      expect(hook.status, JSON.stringify(hook.body)).to.be.oneOf([200, 201])
      for (let i = 0; i < 3; i++) {
        expect((await post(beacon.url, '/campaigns/query', { account: tenant.account, visitorId: visitorId(), platform: 'web', event: 'purchase', orderId: `o-${i}` })).status).to.equal(200)
      }
      await until('3 purchases delivered', () => receiver.requests.length >= 3, 30_000, 20)
      expect(nats.output()).not.to.match(/Violation/i)
      expect(beacon.output()).not.to.include(BEACON_PASSWORD)
      expect(beacon.output()).not.to.include('without authentication')
      const refused = await connect({ servers: nats.url }).then(async nc => { await nc.close(); return 'connected' }, (error: Error) => error.message)
      expect(refused).to.match(/Authorization Violation/i)
    } finally {
      await beacon?.kill()
      removeDir(dataDir)
      await nats.close()
      await receiver.close()
    }
  })
})
