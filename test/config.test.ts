import { expect } from 'chai'
import { ConfigError, loadConfig } from '../src/config.js'

describe('configuration', () => {
  it('has the documented defaults', () => {
    expect(loadConfig({})).to.include({ host: '127.0.0.1', port: 8080, dataDir: './data', adminKey: null, bodySizeMaxBytes: 65536, durability: 'flushed', deliveryRetentionMs: 604_800_000 })
  })

  it('reads BEACON_DELIVERY_RETENTION_MS, 0 keeping delivered records', () => {
    expect(loadConfig({ BEACON_DELIVERY_RETENTION_MS: '0' }).deliveryRetentionMs).to.equal(0)
    expect(() => loadConfig({ BEACON_DELIVERY_RETENTION_MS: '-5' })).to.throw(ConfigError, 'BEACON_DELIVERY_RETENTION_MS="-5": expected a whole number')
  })

  it('reads BEACON_VISITOR_RETENTION_DAYS in days (decimals allowed), 0 by default (kept), and its sweep interval', () => {
    expect(loadConfig({})).to.include({ visitorRetentionMs: 0, visitorRetentionSweepMs: 3_600_000 })
    expect(loadConfig({ BEACON_VISITOR_RETENTION_DAYS: '395', BEACON_VISITOR_RETENTION_SWEEP_MS: '60000' })).to.include({ visitorRetentionMs: 395 * 86_400_000, visitorRetentionSweepMs: 60_000 })
    expect(loadConfig({ BEACON_VISITOR_RETENTION_DAYS: '0.5' }).visitorRetentionMs).to.equal(43_200_000)
    for (const bad of ['-1', 'thirty', ' ', '36501', 'Infinity']) {
      expect(() => loadConfig({ BEACON_VISITOR_RETENTION_DAYS: bad }), bad).to.throw(ConfigError, `BEACON_VISITOR_RETENTION_DAYS=${JSON.stringify(bad)}: expected a number of days from 0 to 36500`)
    }
    expect(() => loadConfig({ BEACON_VISITOR_RETENTION_SWEEP_MS: '10' })).to.throw(ConfigError, 'BEACON_VISITOR_RETENTION_SWEEP_MS="10": expected a whole number from 1000 to 86400000')
  })

  it('reads BEACON_EVENT_RETENTION_DAYS (default 30, 0: no log) and BEACON_EVENT_LOG_MAX_BYTES (default 0: no cap)', () => {
    expect(loadConfig({})).to.include({ eventRetentionDays: 30, eventLogMaxBytes: 0 })
    expect(loadConfig({ BEACON_EVENT_RETENTION_DAYS: '0', BEACON_EVENT_LOG_MAX_BYTES: '1073741824' })).to.include({ eventRetentionDays: 0, eventLogMaxBytes: 1_073_741_824 })
    expect(() => loadConfig({ BEACON_EVENT_RETENTION_DAYS: '3651' })).to.throw(ConfigError, 'BEACON_EVENT_RETENTION_DAYS="3651"')
    expect(() => loadConfig({ BEACON_EVENT_LOG_MAX_BYTES: 'lots' })).to.throw(ConfigError, 'BEACON_EVENT_LOG_MAX_BYTES="lots"')
  })

  it('reads BEACON_REPLAY_INFLIGHT_MAX (default 100, 1 to 10000)', () => {
    expect(loadConfig({})).to.include({ replayInflightMax: 100 })
    expect(loadConfig({ BEACON_REPLAY_INFLIGHT_MAX: '5' })).to.include({ replayInflightMax: 5 })
    expect(() => loadConfig({ BEACON_REPLAY_INFLIGHT_MAX: '0' })).to.throw(ConfigError, 'BEACON_REPLAY_INFLIGHT_MAX="0"')
  })

  it('reads every BEACON_* setting', () => {
    const config = loadConfig({ BEACON_HOST: '0.0.0.0', BEACON_PORT: '9000', BEACON_DATA_DIR: '/tmp/x', BEACON_ADMIN_KEY: 'k'.repeat(16), BEACON_MAX_BODY_BYTES: '1024', BEACON_DURABILITY: 'committed' })
    expect(config).to.include({ host: '0.0.0.0', port: 9000, dataDir: '/tmp/x', adminKey: 'k'.repeat(16), bodySizeMaxBytes: 1024, durability: 'committed' })
  })

  it('reports one clear line per bad value', () => {
    try {
      loadConfig({ BEACON_PORT: 'eighty', BEACON_DURABILITY: 'fsync', BEACON_MAX_BODY_BYTES: '-1', BEACON_ADMIN_KEY: 'short' })
      expect.fail('should throw')
    } catch (error) {
      expect(error).to.be.instanceOf(ConfigError)
      expect((error as ConfigError).problems).to.deep.equal([
        'BEACON_DURABILITY="fsync": expected one of flushed, committed',
        'BEACON_ADMIN_KEY: must be at least 16 characters (or unset, to have one generated)',
        'BEACON_PORT="eighty": expected a whole number from 0 to 65535',
        'BEACON_MAX_BODY_BYTES="-1": expected a whole number from 256 to 16777216',
      ])
    }
  })

  describe('cluster mode', () => {
    const cluster = { BEACON_CLUSTER: 'prod-1', BEACON_NATS_URL: 'nats://127.0.0.1:4222', BEACON_ADMIN_KEY: 'k'.repeat(16), BEACON_SECRETS_KEY: Buffer.alloc(32, 7).toString('base64') }

    it('is off by default, with the documented defaults for when it is on', () => {
      expect(loadConfig({})).to.include({ cluster: null, nodeId: null, partitions: 64, replicas: 1, leaseMs: 3000 })
      expect(loadConfig(cluster)).to.include({ cluster: 'prod-1', nodeId: null, partitions: 64, replicas: 1, leaseMs: 3000 })
    })

    it('reads its settings', () => {
      const config = loadConfig({ ...cluster, BEACON_NODE_ID: 'node_a', BEACON_PARTITIONS: '128', BEACON_REPLICAS: '3', BEACON_LEASE_MS: '1500' })
      expect(config).to.include({ cluster: 'prod-1', nodeId: 'node_a', partitions: 128, replicas: 3, leaseMs: 1500 })
      expect(config.forwardBatch, 'batched forwarding by default').to.equal(true)
      expect(loadConfig({ ...cluster, BEACON_FORWARD_BATCH: 'false' }).forwardBatch).to.equal(false)
      expect(config.changelogStreams, 'one changelog stream by default').to.equal(1)
      expect(loadConfig({ ...cluster, BEACON_CHANGELOG_STREAMS: '3' }).changelogStreams).to.equal(3)
      expect(() => loadConfig({ ...cluster, BEACON_CHANGELOG_STREAMS: '17' })).to.throw(ConfigError)
    })

    it('needs BEACON_NATS_URL, BEACON_ADMIN_KEY and BEACON_SECRETS_KEY, and names the bad values one line each', () => {
      expect(() => loadConfig({ BEACON_CLUSTER: 'c' })).to.throw(ConfigError).with.property('problems').that.deep.equals([
        'BEACON_CLUSTER: cluster mode needs BEACON_NATS_URL (the NATS JetStream cluster its nodes share)',
        'BEACON_CLUSTER: cluster mode needs BEACON_ADMIN_KEY (the same on every node)',
        'BEACON_CLUSTER: cluster mode needs BEACON_SECRETS_KEY (the same on every node; make one with: openssl rand -base64 32)',
      ])
      expect(() => loadConfig({ ...cluster, BEACON_CLUSTER: 'a.b', BEACON_NODE_ID: 'x y', BEACON_PARTITIONS: '0' })).to.throw(ConfigError).with.property('problems').that.deep.equals([
        'BEACON_CLUSTER="a.b": expected 1 to 64 letters, digits, - or _',
        'BEACON_NODE_ID="x y": expected 1 to 64 letters, digits, - or _',
        'BEACON_PARTITIONS="0": expected a whole number from 1 to 4096',
      ])
    })

    it('reads BEACON_PUBLIC_URL (http or https, without its trailing slash) and refuses any other URL', () => {
      expect(loadConfig(cluster).publicUrl).to.equal(null)
      expect(loadConfig({ ...cluster, BEACON_PUBLIC_URL: 'https://node-1.beacon.example/api/' }).publicUrl).to.equal('https://node-1.beacon.example/api')
      expect(loadConfig({ ...cluster, BEACON_PUBLIC_URL: 'http://10.0.0.1:8080' }).publicUrl).to.equal('http://10.0.0.1:8080')
      for (const bad of ['10.0.0.1:8080', 'ftp://node-1', 'https://node-1/?a=1', 'https://user:secret@node-1']) {
        expect(() => loadConfig({ ...cluster, BEACON_PUBLIC_URL: bad }), bad).to.throw(ConfigError).with.property('problems').that.has.length(1).and.satisfy((problems: string[]) => !problems[0]!.includes('secret'))
      }
      expect(() => loadConfig({ BEACON_PUBLIC_URL: 'http://node-1' })).to.throw(ConfigError).with.property('problems').that.deep.equals([
        'BEACON_PUBLIC_URL: only applies in cluster mode (set BEACON_CLUSTER)',
      ])
    })

    it('refuses cluster settings without BEACON_CLUSTER', () => {
      expect(() => loadConfig({ BEACON_PARTITIONS: '32' })).to.throw(ConfigError).with.property('problems').that.deep.equals([
        'BEACON_PARTITIONS: only applies in cluster mode (set BEACON_CLUSTER)',
      ])
      expect(() => loadConfig({ BEACON_CLUSTER_RESIGN: 'true' })).to.throw(ConfigError).with.property('problems').that.deep.equals([
        'BEACON_CLUSTER_RESIGN: only applies in cluster mode (set BEACON_CLUSTER)',
      ])
      expect(() => loadConfig({ BEACON_FORWARD_BATCH: 'false' })).to.throw(ConfigError).with.property('problems').that.deep.equals([
        'BEACON_FORWARD_BATCH: only applies in cluster mode (set BEACON_CLUSTER)',
      ])
      expect(() => loadConfig({ BEACON_CHANGELOG_STREAMS: '3' })).to.throw(ConfigError).with.property('problems').that.deep.equals([
        'BEACON_CHANGELOG_STREAMS: only applies in cluster mode (set BEACON_CLUSTER)',
      ])
    })
  })

  describe('NATS credentials and TLS', () => {
    const nats = { BEACON_NATS_URL: 'nats://127.0.0.1:4222' }
    const file = new URL(import.meta.url).pathname

    it('reads a user and password, a creds file, an nkey file and TLS files', () => {
      expect(loadConfig({ ...nats, BEACON_NATS_USER: 'beacon', BEACON_NATS_PASSWORD: 'pw' }).natsAuth).to.include({ user: 'beacon', password: 'pw', credsFile: null })
      expect(loadConfig({ ...nats, BEACON_NATS_CREDS: file }).natsAuth).to.include({ credsFile: file, user: null })
      expect(loadConfig({ ...nats, BEACON_NATS_NKEY: file }).natsAuth).to.include({ nkeyFile: file })
      expect(loadConfig({ ...nats, BEACON_NATS_TLS_CA: file, BEACON_NATS_TLS_CERT: file, BEACON_NATS_TLS_KEY: file }).natsAuth).to.include({ tlsCaFile: file, tlsCertFile: file, tlsKeyFile: file })
      expect(loadConfig(nats).natsAuth).to.deep.equal({ user: null, password: null, credsFile: null, nkeyFile: null, tlsCaFile: null, tlsCertFile: null, tlsKeyFile: null })
    })

    it('refuses half a setting, two ways at once, missing files and settings without a URL, never echoing a credential', () => {
      const problems = (env: Record<string, string>): string[] => {
        try {
          loadConfig(env)
        } catch (error) {
          return (error as ConfigError).problems
        }
        throw new Error('accepted')
      }
      expect(problems({ ...nats, BEACON_NATS_USER: 'beacon' })).to.deep.equal(['BEACON_NATS_USER: set BEACON_NATS_USER and BEACON_NATS_PASSWORD together'])
      expect(problems({ ...nats, BEACON_NATS_PASSWORD: 's3cret-pw' })).to.deep.equal(['BEACON_NATS_PASSWORD: set BEACON_NATS_USER and BEACON_NATS_PASSWORD together'])
      expect(problems({ ...nats, BEACON_NATS_USER: 'u', BEACON_NATS_PASSWORD: 's3cret-pw', BEACON_NATS_CREDS: file })).to.deep.equal(['BEACON_NATS_USER, BEACON_NATS_CREDS: set one way of authenticating to NATS, not several'])
      expect(problems({ ...nats, BEACON_NATS_CREDS: '/nonexistent/beacon.creds' })).to.deep.equal(['BEACON_NATS_CREDS="/nonexistent/beacon.creds": no readable file there'])
      expect(problems({ ...nats, BEACON_NATS_TLS_CERT: file })).to.deep.equal(['BEACON_NATS_TLS_CERT: set BEACON_NATS_TLS_CERT and BEACON_NATS_TLS_KEY together'])
      expect(problems({ BEACON_NATS_URL: 'nats://u:p@127.0.0.1:4222', BEACON_NATS_CREDS: file })).to.deep.equal(['BEACON_NATS_URL: carries credentials and BEACON_NATS_CREDS is set too; keep one'])
      expect(problems({ BEACON_NATS_USER: 'u', BEACON_NATS_PASSWORD: 's3cret-pw' })).to.deep.equal([
        'BEACON_NATS_USER: only applies with BEACON_NATS_URL',
        'BEACON_NATS_PASSWORD: only applies with BEACON_NATS_URL',
      ])
      expect(problems({ ...nats, BEACON_NATS_PASSWORD: 's3cret-pw' }).join('\n')).not.to.include('s3cret-pw')
    })
  })
})
