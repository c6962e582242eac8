import { expect } from 'chai'
import { ConfigError, loadConfig, redactUrl } from '../../src/config.js'
import { settingsOf } from '../../src/start.js'

function problems (env: Record<string, string>): string[] {
  try {
    loadConfig(env)
  } catch (error) {
    if (error instanceof ConfigError) return error.problems
    throw error
  }
  return []
}

describe('configuration of the operations surface', () => {
  it('has metrics on, request logging off and no NATS by default', () => {
    expect(loadConfig({})).to.include({ metrics: true, requestLogSample: 0, natsUrl: null })
  })

  it('reads BEACON_METRICS, BEACON_REQUEST_LOG_SAMPLE and BEACON_NATS_URL', () => {
    const config = loadConfig({ BEACON_METRICS: 'false', BEACON_REQUEST_LOG_SAMPLE: '0.01', BEACON_NATS_URL: 'nats://127.0.0.1:4222' })
    expect(config).to.include({ metrics: false, requestLogSample: 0.01, natsUrl: 'nats://127.0.0.1:4222' })
    expect(loadConfig({ BEACON_REQUEST_LOG_SAMPLE: '1' }).requestLogSample).to.equal(1)
    expect(loadConfig({ BEACON_NATS_URL: 'tls://a.example:4222, nats://b.example:4222' }).natsUrl).to.equal('tls://a.example:4222, nats://b.example:4222')
  })

  it('reads the panel settings: session TTL, media size, report fold period, report counting', () => {
    expect(loadConfig({})).to.include({ sessionTtlMs: 43_200_000, mediaSizeMaxBytes: 2 * 1024 * 1024, reportFoldMs: 10_000, reports: true })
    const config = loadConfig({ BEACON_SESSION_TTL_MS: '60000', BEACON_MEDIA_MAX_BYTES: '4096', BEACON_REPORT_FOLD_MS: '50', BEACON_REPORTS: 'false' })
    expect(config).to.include({ sessionTtlMs: 60_000, mediaSizeMaxBytes: 4096, reportFoldMs: 50, reports: false })
    expect(problems({ BEACON_SESSION_TTL_MS: '10', BEACON_MEDIA_MAX_BYTES: 'big', BEACON_REPORT_FOLD_MS: '0', BEACON_REPORTS: 'no' })).to.deep.equal([
      'BEACON_SESSION_TTL_MS="10": expected a whole number from 1000 to 2592000000',
      'BEACON_MEDIA_MAX_BYTES="big": expected a whole number from 1024 to 67108864',
      'BEACON_REPORT_FOLD_MS="0": expected a whole number from 10 to 3600000',
      'BEACON_REPORTS="no": expected true or false',
    ])
  })

  it('refuses bad values, one line each', () => {
    expect(problems({ BEACON_METRICS: 'yes', BEACON_REQUEST_LOG_SAMPLE: '2', BEACON_NATS_URL: 'http://127.0.0.1:4222' })).to.deep.equal([
      'BEACON_METRICS="yes": expected true or false',
      'BEACON_REQUEST_LOG_SAMPLE="2": expected a number from 0 to 1',
      'BEACON_NATS_URL: expected nats://host:port or tls://host:port (several separated by commas); got scheme http:',
    ])
    expect(problems({ BEACON_REQUEST_LOG_SAMPLE: 'half' })).to.deep.equal(['BEACON_REQUEST_LOG_SAMPLE="half": expected a number from 0 to 1'])
    expect(problems({ BEACON_NATS_URL: 'localhost:4222' })).to.have.length(1)
    expect(problems({ BEACON_NATS_URL: 'nats://a:4222,' })).to.have.length(1)
  })

  it('never echoes a NATS URL (it may carry a password), in errors or in the logged settings', () => {
    const [problem] = problems({ BEACON_NATS_URL: 'nats://user:hunter2@:4222' })
    expect(problem).not.to.include('hunter2')
    expect(redactUrl('nats://user:hunter2@a:4222,tls://b:4222')).to.equal('nats://[redacted]@a:4222,tls://b:4222')
    const settings = settingsOf(loadConfig({ BEACON_NATS_URL: 'nats://user:hunter2@a:4222', BEACON_ADMIN_KEY: 'k'.repeat(20) }))
    expect(JSON.stringify(settings)).not.to.include('hunter2')
    expect(JSON.stringify(settings)).not.to.include('k'.repeat(20))
    expect(settings).to.include({ nats: 'nats://[redacted]@a:4222', adminKeyFrom: 'BEACON_ADMIN_KEY' })
  })

  it('never logs the NATS password of BEACON_NATS_PASSWORD: the settings say only how Beacon authenticates', () => {
    const settings = settingsOf(loadConfig({ BEACON_NATS_URL: 'nats://a:4222', BEACON_NATS_USER: 'beacon', BEACON_NATS_PASSWORD: 'hunter2-nats' }))
    expect(JSON.stringify(settings)).not.to.include('hunter2-nats')
    expect(settings).to.deep.include({ natsAccess: { credentials: 'user', tls: false } })
    expect(settings).not.to.have.property('natsAuth')
  })
})
