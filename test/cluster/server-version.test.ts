// Which nats-server releases cluster mode runs on (2.10.0 and newer, with JetStream), and a node's
// refusal to start on an older one: Debian 12's /usr/sbin/nats-server (2.9.10) stands in for it.

import { expect } from 'chai'
import { existsSync } from 'node:fs'
import { isSupportedServer } from '../../src/cluster/server-version.js'
import { removeDir, startBeacon, tempDir } from '../helpers/beacon.js'
import { startNatsServer, type NatsServer } from '../helpers/nats-server.js'

/** Cluster mode needs a secrets key (its check comes after the server's version). */
const SECRETS_KEY = Buffer.alloc(32, 7).toString('base64')

/** An old nats-server to refuse: BEACON_TEST_NATS_SERVER_OLD, else Debian 12's package (2.9.10). */
const OLD_NATS_SERVER = process.env.BEACON_TEST_NATS_SERVER_OLD ?? '/usr/sbin/nats-server'

describe('cluster: the nats-server releases cluster mode runs on', () => {
  it('runs on 2.10.0 and newer, not on 2.9 or older, nor on a version it cannot read', () => {
    for (const version of ['2.10.0', '2.10.27', 'v2.11.4', '2.12.1-beta.2', '3.0.0']) expect(isSupportedServer(version), version).to.equal(true)
    for (const version of ['2.9.10', '2.9.25', '2.8.4', '1.12.0', 'unknown', '']) expect(isSupportedServer(version), version).to.equal(false)
  })

  describe('a node started against an older server', function () {
    this.timeout(60_000)
    let old: NatsServer
    let dataDir: string

    before(async function () {
      if (!existsSync(OLD_NATS_SERVER)) throw new Error(`no old nats-server at ${OLD_NATS_SERVER} (apt-get install nats-server on Debian 12, or set BEACON_TEST_NATS_SERVER_OLD)`)
      old = await startNatsServer({ bin: OLD_NATS_SERVER })
      dataDir = tempDir()
    })
    after(async () => {
      await old?.close()
      if (dataDir !== undefined) removeDir(dataDir)
    })

    it('refuses to start with one line naming the minimum release', async () => {
      const outcome = await startBeacon({ dataDir, env: { BEACON_CLUSTER: 'old', BEACON_NATS_URL: old.url, BEACON_SECRETS_KEY: SECRETS_KEY } })
        .then(async started => { await started.kill(); return 'it started' }, (error: unknown) => (error as Error).message)
      expect(outcome).to.match(/beacon: failed to start: nats-server 2\.9\.\d+ \(.*\) is too old: cluster mode needs nats-server 2\.10\.0 or newer with JetStream \(BEACON_NATS_URL\)/)
    })

    it('starts anyway with BEACON_NATS_ANY_VERSION=true (benchmarks comparing releases), logging why it should not', async () => {
      const started = await startBeacon({ dataDir, env: { BEACON_CLUSTER: 'old', BEACON_NATS_URL: old.url, BEACON_NATS_ANY_VERSION: 'true', BEACON_SECRETS_KEY: SECRETS_KEY } })
      try {
        expect(started.output()).to.match(/nats-server 2\.9\.\d+ .* is too old: .*starting anyway \(BEACON_NATS_ANY_VERSION/)
      } finally {
        await started.stop()
      }
    })
  })
})
