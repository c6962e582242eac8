// How Beacon logs in to NATS and checks its servers, with real processes: a nats-server requiring an
// nkey user, then one serving TLS only with a certificate from a private CA (made here with openssl),
// each with a Beacon in NATS mode (BEACON_NATS_NKEY; tls:// and BEACON_NATS_TLS_CA). Beacon starts and
// delivers through JetStream; without the key, or without the CA, it refuses to start with one line.
// (User and password: test/cluster/shipped-nats-config.test.ts.)

import { expect } from 'chai'
import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { nkeys } from '@nats-io/transport-node'
import { removeDir, startBeacon, tempDir } from '../helpers/beacon.js'
import { startNatsServer, type NatsServer } from '../helpers/nats-server.js'

/** Starts Beacon in NATS mode with `env`; resolves with its output, or the start failure's message. */
async function tryStart (env: Record<string, string>): Promise<{ started: boolean, output: string }> {
  const dataDir = tempDir()
  try {
    const beacon = await startBeacon({ dataDir, env })
    const output = beacon.output()
    await beacon.stop()
    return { started: true, output }
  } catch (error) {
    return { started: false, output: (error as Error).message }
  } finally {
    removeDir(dataDir)
  }
}

describe('Beacon logs in to NATS with an nkey, and checks a TLS server against its CA (real processes)', function () {
  this.timeout(120_000)
  const dirs: string[] = []
  const servers: NatsServer[] = []
  after(async () => {
    for (const server of servers) await server.close()
    for (const dir of dirs) removeDir(dir)
  })

  it('BEACON_NATS_NKEY: starts with the seed file, refuses to start without it', async () => {
    const user = nkeys.createUser()
    const dir = tempDir('beacon-nkey-')
    dirs.push(dir)
    const seedFile = join(dir, 'beacon.nk')
    writeFileSync(seedFile, new TextDecoder().decode(user.getSeed()) + '\n', { mode: 0o600 })
    const server = await startNatsServer({ config: `jetstream { store_dir: /x }\nauthorization { users: [ { nkey: ${user.getPublicKey()} } ] }\n` })
    servers.push(server)
    const withKey = await tryStart({ BEACON_NATS_URL: server.url, BEACON_NATS_NKEY: seedFile })
    expect(withKey.started, withKey.output).to.equal(true)
    expect(withKey.output).not.to.include('without authentication')
    expect(withKey.output).not.to.include(new TextDecoder().decode(user.getSeed()))
    expect(withKey.output).to.include('"natsAccess":{"credentials":"nkey","tls":false}')
    const without = await tryStart({ BEACON_NATS_URL: server.url })
    expect(without.started).to.equal(false)
    expect(without.output).to.match(/beacon: failed to start: cannot connect to NATS at nats:\/\/127\.0\.0\.1:\d+ \(BEACON_NATS_URL\): [^\n]*Authorization Violation/i)
  })

  it('BEACON_NATS_TLS_CA: connects over TLS to a server whose certificate the CA signed, refuses one it cannot check', async () => {
    const dir = tempDir('beacon-tls-')
    dirs.push(dir)
    const at = (name: string): string => join(dir, name)
    const openssl = (...args: string[]): void => { execFileSync('openssl', args, { stdio: 'ignore' }) }
    openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=Beacon test CA', '-keyout', at('ca-key.pem'), '-out', at('ca.pem'))
    openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=127.0.0.1', '-keyout', at('server-key.pem'), '-out', at('server.csr'))
    // nats.js gives Node no server name for an IP address, and Node then checks the certificate against
    // "localhost": the certificate names both (deployments use host names).
    writeFileSync(at('san.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n')
    openssl('x509', '-req', '-in', at('server.csr'), '-CA', at('ca.pem'), '-CAkey', at('ca-key.pem'), '-CAcreateserial', '-days', '1', '-extfile', at('san.ext'), '-out', at('server.pem'))
    const server = await startNatsServer({ config: `jetstream { store_dir: /x }\ntls { cert_file: ${JSON.stringify(at('server.pem'))}, key_file: ${JSON.stringify(at('server-key.pem'))} }\nauthorization { user: beacon, password: ptls-test-password }\n` })
    servers.push(server)
    const url = server.url.replace('nats://', 'tls://')
    const withCa = await tryStart({ BEACON_NATS_URL: url, BEACON_NATS_TLS_CA: at('ca.pem'), BEACON_NATS_USER: 'beacon', BEACON_NATS_PASSWORD: 'ptls-test-password' })
    expect(withCa.started, withCa.output).to.equal(true)
    expect(withCa.output).to.include('"natsAccess":{"credentials":"user","tls":true}')
    const withoutCa = await tryStart({ BEACON_NATS_URL: url, BEACON_NATS_USER: 'beacon', BEACON_NATS_PASSWORD: 'ptls-test-password' })
    expect(withoutCa.started).to.equal(false)
    expect(withoutCa.output).to.match(/beacon: failed to start: cannot connect to NATS/)
    expect(withoutCa.output).not.to.include('ptls-test-password')
  })
})
