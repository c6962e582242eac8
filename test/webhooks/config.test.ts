import { expect } from 'chai'
import { ApiError } from '../../src/errors.js'
import {
  compileWebhook, nextRunMs, redactWebhook, REDACTED, restoreSecrets, validateWebhook, type WebhookConfig,
} from '../../src/webhooks/index.js'
import { ACCOUNT, SECRET, config } from './helpers.js'

const URL_OK = 'https://hooks.example.com/customer-journey'

function fieldsOf (body: unknown, allowPrivate = false): Record<string, string> {
  const out: Record<string, string> = {}
  for (const item of validateWebhook(body, { allowPrivate })) out[item.field ?? ''] = `${item.code}: ${item.message}`
  return out
}

describe('validateWebhook', () => {
  it('accepts an event, an audience and a schedule webhook with every optional field', () => {
    const full = config(URL_OK, {
      request: {
        method: 'POST',
        headers: { 'X-Source': 'beacon', 'X-Profile': '{{profileId}}' },
        auth: { type: 'basic', username: 'svc', password: 's3cret' },
        signingSecret: SECRET,
        payload: '{"p":{{profileId}},"sku":{{event.sku}},"plan":{{attribute.plan}}}',
      },
      delivery: { mode: 'async', timeoutMs: 5000, proxy: 'http://proxy.example.com:3128', delayMs: 1000, batchSize: 50, maxAttempts: 10, ratePerSecond: 20 },
    })
    expect(validateWebhook(full)).to.deep.equal([])
    expect(validateWebhook(config(URL_OK, { trigger: { kind: 'audience', segments: ['vip'], on: ['enter', 'exit'] } }))).to.deep.equal([])
    expect(validateWebhook(config(URL_OK, { trigger: { kind: 'schedule', cron: '0 * * * *', segments: ['vip'] } }))).to.deep.equal([])
    expect(validateWebhook(config(URL_OK, { trigger: { kind: 'schedule', every: '15m' } }))).to.deep.equal([])
  })

  it('reports every problem at once (more than TypeBox reports per check), each at its JSON pointer', () => {
    const body = config('ftp://x.example.com/', {
      trigger: { kind: 'audience', segments: ['vip', 'bad name'], on: ['join'] },
      request: { method: 'PATCH', headers: { 'X-Bad': 'a\r\nb' }, auth: { type: 'basic', username: 'a:b' } },
      delivery: { mode: 'sync', timeoutMs: 50, batchSize: 0, extra: 1, delayMs: 5 },
    })
    delete body.name
    body.enabled = 'yes'
    const fields = fieldsOf(body)
    expect(Object.keys(fields)).to.have.members([
      '/name', '/enabled', '/trigger/segments/1', '/trigger/on/0', '/request/method', '/request/url', '/request/headers/X-Bad',
      '/request/auth/username', '/request/auth/password', '/delivery/timeoutMs', '/delivery/batchSize', '/delivery/extra', '/delivery/delayMs',
    ])
    expect(fields['/delivery/extra']).to.match(/^unknown_field/)
    expect(fields['/delivery/timeoutMs']).to.equal('invalid_field: delivery/timeoutMs: expected a number at least 100.')
    expect(fields['/request/url']).to.match(/^invalid_field: url must be an absolute http/)
    expect(fields['/request/headers/X-Bad']).to.match(/CR, LF/)
  })

  it('refuses a body that is not an object', () => {
    expect(validateWebhook(null)).to.deep.equal([{ code: 'invalid_field', field: '', message: 'The body: expected an object.' }])
    expect(validateWebhook([])).to.have.length(1)
  })

  it('refuses an unknown placeholder in the payload at /request/payload, naming it and its position', () => {
    const fields = fieldsOf(config(URL_OK, { request: { payload: '{"a":{{profile_id}}}' } }))
    expect(fields).to.have.keys('/request/payload')
    expect(fields['/request/payload']).to.match(/^invalid_field: Unknown placeholder \{\{profile_id\}\} at position 5/)
  })

  it('refuses a payload that cannot render valid JSON at /request/payload', () => {
    expect(fieldsOf(config(URL_OK, { request: { payload: '{"a":{{profileId}}' } }))['/request/payload']).to.match(/does not render valid JSON/)
    expect(fieldsOf(config(URL_OK, { request: { payload: '{"a":{{profileId}}{{event}}}' } }))['/request/payload']).to.match(/does not render valid JSON/)
  })

  it('requires a GET or DELETE payload to render an object (its fields become the query)', () => {
    expect(fieldsOf(config(URL_OK, { request: { method: 'GET', payload: '[{{profileId}}]' } }))['/request/payload']).to.match(/JSON object/)
    expect(validateWebhook(config(URL_OK, { request: { method: 'DELETE' } }))).to.deep.equal([])
  })

  it('refuses unknown placeholders in the url, and placeholders in its host', () => {
    expect(fieldsOf(config(URL_OK + '/{{nope}}'))['/request/url']).to.match(/Unknown placeholder \{\{nope\}\}/)
    expect(fieldsOf(config('https://{{account}}.example.com/x'))['/request/url']).to.match(/path and query/)
    expect(validateWebhook(config(URL_OK + '/{{profileId}}?e={{event}}'))).to.deep.equal([])
  })

  it('refuses credentials and fragments in the url', () => {
    expect(fieldsOf(config('https://u:p@hooks.example.com/'))['/request/url']).to.match(/credentials/)
    expect(fieldsOf(config('https://hooks.example.com/#x'))['/request/url']).to.match(/fragment/)
  })

  it('enforces the limits on every field', () => {
    const long = (n: number): string => 'a'.repeat(n)
    const cases: [Parameters<typeof config>[1], string][] = [
      [{ name: long(201) }, '/name'],
      [{ trigger: { kind: 'event', events: Array.from({ length: 101 }, (_, i) => `e${i}`) } }, '/trigger/events'],
      [{ trigger: { kind: 'event', events: [] } }, '/trigger/events'],
      [{ request: { url: URL_OK + '/' + long(2048) } }, '/request/url'],
      [{ request: { headers: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`X-H${i}`, 'v'])) } }, '/request/headers'],
      [{ request: { payload: long(16_385) } }, '/request/payload'],
      [{ delivery: { timeoutMs: 60_001 } }, '/delivery/timeoutMs'],
      [{ delivery: { timeoutMs: 1500.5 } }, '/delivery/timeoutMs'],
      [{ delivery: { batchSize: 1001 } }, '/delivery/batchSize'],
      [{ delivery: { maxAttempts: 51 } }, '/delivery/maxAttempts'],
      [{ delivery: { maxAttempts: 0 } }, '/delivery/maxAttempts'],
      [{ delivery: { ratePerSecond: 0.5 } }, '/delivery/ratePerSecond'],
      [{ delivery: { ratePerSecond: 100_001 } }, '/delivery/ratePerSecond'],
      [{ delivery: { delayMs: 86_400_001 } }, '/delivery/delayMs'],
      [{ delivery: { delayMs: -1 } }, '/delivery/delayMs'],
    ]
    for (const [patch, field] of cases) {
      expect(fieldsOf(config(URL_OK, patch)), JSON.stringify(patch).slice(0, 80)).to.have.property(field)
    }
  })

  it('checks schedules: every from 10s to 31d, cron valid and not more often than every 10s, exactly one of them', () => {
    const at = (trigger: Record<string, unknown>): Record<string, string> => fieldsOf(config(URL_OK, { trigger: { kind: 'schedule', ...trigger } }))
    expect(at({ every: '5s' })['/trigger/every']).to.match(/from 10s to 31d/)
    expect(at({ every: '32d' })['/trigger/every']).to.match(/from 10s to 31d/)
    expect(at({ every: '15 minutes' })['/trigger/every']).to.match(/like "30s"/)
    expect(at({ every: '10s' })).to.deep.equal({})
    expect(at({ every: '31d' })).to.deep.equal({})
    expect(at({ cron: '61 * * * *' })['/trigger/cron']).to.match(/not a valid pattern/)
    expect(at({ cron: '* * * * * *' })['/trigger/cron']).to.match(/more often than every 10s/)
    expect(at({ cron: '*/10 * * * * *' })).to.deep.equal({})
    expect(at({})['/trigger']).to.match(/exactly one of cron and every/)
    expect(at({ cron: '0 * * * *', every: '1h' })['/trigger']).to.match(/exactly one of cron and every/)
  })

  it('reports a bad trigger or auth field at its own pointer, not as a failed union', () => {
    expect(fieldsOf(config(URL_OK, { trigger: { kind: 'audience', segments: ['vip'], on: ['join'] } }))).to.have.keys('/trigger/on/0')
    expect(fieldsOf(config(URL_OK, { trigger: { kind: 'nope' } }))).to.have.keys('/trigger/kind')
    expect(fieldsOf(config(URL_OK, { request: { auth: { type: 'bearer' } } }))).to.have.keys('/request/auth/token')
    expect(fieldsOf(config(URL_OK, { request: { auth: { type: 'basic', username: 'a:b', password: 'p' } } }))).to.have.keys('/request/auth/username')
    expect(fieldsOf(config(URL_OK, { request: { auth: { type: 'bearer', token: 'has space' } } }))).to.have.keys('/request/auth/token')
  })

  it('checks header names, refuses headers Beacon sets, and Authorization next to auth', () => {
    expect(fieldsOf(config(URL_OK, { request: { headers: { 'Bad Name': 'v' } } }))).to.have.keys('/request/headers/Bad Name')
    expect(fieldsOf(config(URL_OK, { request: { headers: { 'webhook-id': 'v', Host: 'x' } } }))).to.have.keys('/request/headers/webhook-id', '/request/headers/Host')
    expect(fieldsOf(config(URL_OK, { request: { headers: { Authorization: 'Bearer x' }, auth: { type: 'bearer', token: 't' } } }))).to.have.keys('/request/headers/Authorization')
    expect(fieldsOf(config(URL_OK, { request: { headers: { 'X-A': '1', 'x-a': '2' } } }))).to.have.keys('/request/headers/x-a')
    expect(fieldsOf(config(URL_OK, { request: { headers: { 'X-P': '{{nope}}' } } }))['/request/headers/X-P']).to.match(/Unknown placeholder/)
  })

  it('requires a signing secret of whsec_ and 24 to 64 base64 bytes', () => {
    expect(fieldsOf(config(URL_OK, { request: { signingSecret: 'whsec_' + Buffer.alloc(8).toString('base64') } }))).to.have.keys('/request/signingSecret')
    expect(fieldsOf(config(URL_OK, { request: { signingSecret: 'secret' } }))).to.have.keys('/request/signingSecret')
  })

  it('refuses loopback, private and metadata url or proxy hosts at save time unless private targets are allowed', () => {
    expect(fieldsOf(config('http://127.0.0.1:8080/x'))['/request/url']).to.match(/127\.0\.0\.1 is a loopback address/)
    expect(fieldsOf(config('http://169.254.169.254/latest'))['/request/url']).to.match(/metadata/)
    expect(fieldsOf(config('http://localhost/x'))['/request/url']).to.match(/loopback/)
    expect(fieldsOf(config(URL_OK, { delivery: { proxy: 'http://10.0.0.5:3128' } }))['/delivery/proxy']).to.match(/proxy 10\.0\.0\.5 is a private address/)
    expect(validateWebhook(config('http://127.0.0.1:8080/x', { delivery: { proxy: 'http://10.0.0.5:3128' } }), { allowPrivate: true })).to.deep.equal([])
  })

  it('refuses proxy URLs with credentials or a path, a delay on a sync webhook, and a sync schedule', () => {
    expect(fieldsOf(config(URL_OK, { delivery: { proxy: 'http://u:p@proxy.example.com:3128' } }))).to.have.keys('/delivery/proxy')
    expect(fieldsOf(config(URL_OK, { delivery: { proxy: 'http://proxy.example.com:3128/x' } }))).to.have.keys('/delivery/proxy')
    expect(fieldsOf(config(URL_OK, { delivery: { mode: 'sync', delayMs: 10 } }))).to.have.keys('/delivery/delayMs')
    expect(fieldsOf(config(URL_OK, { delivery: { mode: 'sync' }, trigger: { kind: 'schedule', every: '1h' } }))).to.have.keys('/delivery/mode')
  })
})

describe('compileWebhook', () => {
  it('throws a 400 ApiError listing the problems', () => {
    try {
      compileWebhook('wh', ACCOUNT, config(URL_OK, { request: { payload: '{{nope}}' }, delivery: { batchSize: 0 } }))
      expect.fail('should throw')
    } catch (err) {
      expect(err).to.be.instanceOf(ApiError)
      expect((err as ApiError).status).to.equal(400)
      expect((err as ApiError).items.map(i => i.field)).to.have.members(['/delivery/batchSize', '/request/payload'])
    }
  })

  it('precomputes the auth header, defaults and the effective batch size', () => {
    const headersOf = (webhook: { staticHeaderList: readonly string[] }): Record<string, string> =>
      Object.fromEntries(webhook.staticHeaderList.flatMap((v, i, all) => i % 2 === 0 ? [[v, all[i + 1]!]] : []))
    const basic = compileWebhook('wh', ACCOUNT, config(URL_OK, { request: { auth: { type: 'basic', username: 'svc', password: 'pw' } }, delivery: { batchSize: 20 } }))
    expect(headersOf(basic)).to.include({ authorization: 'Basic ' + Buffer.from('svc:pw').toString('base64'), 'content-type': 'application/json' })
    expect(basic).to.include({ maxAttempts: 8, delayMs: 0, batchSize: 20, bodyIsArray: true, ratePerSecond: null, hasBody: true })
    const get = compileWebhook('wh', ACCOUNT, config(URL_OK, { request: { method: 'GET', auth: { type: 'bearer', token: 'tok' } }, delivery: { batchSize: 20 } }))
    expect(headersOf(get)).to.include({ authorization: 'Bearer tok' })
    expect(headersOf(get)).not.to.have.property('content-type')
    expect(get).to.include({ batchSize: 1, bodyIsArray: false, hasBody: false })
  })

  it('parses schedules: every aligned to the epoch, cron in UTC', () => {
    const every = compileWebhook('wh', ACCOUNT, config(URL_OK, { trigger: { kind: 'schedule', every: '15m' } }))
    const cron = compileWebhook('wh', ACCOUNT, config(URL_OK, { trigger: { kind: 'schedule', cron: '30 2 * * *' } }))
    if (every.trigger.kind !== 'schedule' || cron.trigger.kind !== 'schedule') throw new Error('not a schedule')
    const t = Date.UTC(2025, 0, 1, 10, 7)
    expect(nextRunMs(every.trigger.schedule, t)).to.equal(Date.UTC(2025, 0, 1, 10, 15))
    expect(nextRunMs(cron.trigger.schedule, t)).to.equal(Date.UTC(2025, 0, 2, 2, 30))
  })
})

describe('redactWebhook', () => {
  const saved = config(URL_OK, {
    request: {
      auth: { type: 'basic', username: 'svc', password: 'pw-secret' },
      signingSecret: SECRET,
      headers: { 'X-Api-Key': 'key-secret', 'X-Source': 'beacon' },
    },
  }) as unknown as WebhookConfig

  it('replaces the password, token, signing secret and credential-like headers with [redacted]', () => {
    const shown = redactWebhook(saved)
    expect(JSON.stringify(shown)).not.to.match(/pw-secret|key-secret|whsec_/)
    expect(shown.request.auth).to.deep.equal({ type: 'basic', username: 'svc', password: REDACTED })
    expect(shown.request.signingSecret).to.equal(REDACTED)
    expect(shown.request.headers).to.deep.equal({ 'X-Api-Key': REDACTED, 'X-Source': 'beacon' })
    expect(redactWebhook({ ...saved, request: { ...saved.request, auth: { type: 'bearer', token: 'tok-secret' } } }).request.auth).to.deep.equal({ type: 'bearer', token: REDACTED })
    expect(saved.request.signingSecret).to.equal(SECRET) // the original is untouched
  })

  it('lets a client PUT back what GET returned: [redacted] keeps the stored secrets', () => {
    const restored = restoreSecrets(redactWebhook(saved), saved)
    expect(restored).to.deep.equal(saved)
    expect(validateWebhook(restored)).to.deep.equal([])
    // With nothing stored, [redacted] is refused rather than saved as a password.
    expect(fieldsOf(restoreSecrets(redactWebhook(saved), null))).to.have.keys('/request/auth/password', '/request/signingSecret', '/request/headers/X-Api-Key')
  })
})
