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
})
