// google-ads-customer-match end to end: a real in-process Beacon adding and removing people of a
// Customer Match list through offline user data jobs of the Google Ads double, with the OAuth2
// refresh-token flow.

import { expect } from 'chai'
import { admin, createTenant, post, type Tenant } from '../helpers/beacon.js'
import { startInProcess, type InProcess } from '../helpers/in-process.js'
import { expectError } from '../helpers/errors.js'
import { until } from '../helpers/until.js'
import { sha256Hex } from '../../src/destinations/normalize.js'
import { googleEmail } from '../../src/destinations/google-ads.js'
import { GoogleAdsDouble } from './doubles/google-ads-double.js'

describe('google-ads-customer-match destination (Google Ads and OAuth2 double)', () => {
  let beacon: InProcess
  let tenant: Tenant
  let google: GoogleAdsDouble

  beforeEach(async () => {
    beacon = await startInProcess()
    tenant = await createTenant(beacon.url)
    google = await new GoogleAdsDouble(() => beacon.clock.nowMs()).start()
    expect((await admin(beacon.url, 'PUT', `/admin/accounts/${tenant.account}/segments/vip`, { rule: { fact: 'attribute.tier', op: 'eq', value: 'vip' } })).status).to.equal(200)
  })
  afterEach(async () => {
    await beacon.close()
    await google.close()
  })

  const path = `/admin/accounts/${'{account}'}/destinations/gads`
  const url = (): string => path.replace('{account}', tenant.account)
  const body = (settings: Record<string, unknown> = {}): Record<string, unknown> => ({
    type: 'google-ads-customer-match', name: 'VIP list', enabled: true, audiences: ['vip'],
    credentials: { developerToken: 'g-dev', clientId: 'g-client', clientSecret: 'g-secret', refreshToken: 'g-refresh' },
    settings: { customerId: '1234567890', userListId: '555', apiBaseUrl: google.url, tokenUrl: `${google.url}/token`, ...settings },
  })
  const vip = async (profileId: string, attributes: Record<string, unknown>): Promise<void> => {
    const res = await post(beacon.url, '/profiles/attributes', { account: tenant.account, profileId, token: tenant.token, attributes })
    expect(res.status, JSON.stringify(res.body)).to.equal(200)
  }
  const deliveries = async (): Promise<any[]> => (await admin(beacon.url, 'GET', `${url()}/deliveries`)).body.deliveries

  it('needs every credential again when the token endpoint moves', async () => {
    expect((await admin(beacon.url, 'PUT', url(), body())).status).to.equal(200)
    const moved = await admin(beacon.url, 'PATCH', url(), { settings: { tokenUrl: 'http://127.0.0.3:9/token' } })
    expectError(moved, 'invalid_field', '/credentials/developerToken')
    expect(moved.body.errors.map((e: { field: string }) => e.field)).to.have.members(['/credentials/developerToken', '/credentials/clientId', '/credentials/clientSecret', '/credentials/refreshToken'])
  })

  it('adds on enter and removes on exit through create, addOperations and run jobs, with one access token reused', async () => {
    expect((await admin(beacon.url, 'PUT', url(), body())).status).to.equal(200)
    await vip('p-1', { email: ' Jane.Doe@GMAIL.com', phone: '+1 657 777 0000', tier: 'vip' })
    const email = sha256Hex(googleEmail('jane.doe@gmail.com'))
    expect(email).to.equal(sha256Hex('janedoe@gmail.com'))
    await until('added', () => google.members().length === 2)
    expect(google.members()).to.deep.equal([email, sha256Hex('+16577770000')].sort())
    await vip('p-1', { tier: 'basic' })
    await until('removed', () => google.members().length === 0)
    expect(google.tokensIssued).to.have.length(1)
    expect([...google.jobs.values()].map(job => job.ran)).to.deep.equal([true, true])
    const paths = google.requests.map(request => request.path.replace(/[0-9]+$/, 'N'))
    expect(paths.filter(p => p.endsWith(':create'))).to.have.length(2)
    expect(google.allBodies()).not.to.contain('Jane').and.not.to.contain('jane')
    for (const request of google.requests.filter(r => r.path !== '/token')) expect(request.headers['developer-token']).to.equal('g-dev')
  })

  it('refreshes the access token on a 401 and carries on', async () => {
    expect((await admin(beacon.url, 'PUT', url(), body())).status).to.equal(200)
    await vip('p-2', { email: 'a@example.com', tier: 'vip' })
    await until('added', () => google.members().length === 1)
    google.expireTokens()
    await vip('p-3', { email: 'b@example.com', tier: 'vip' })
    await until('added with a new token', () => google.members().length === 2)
    expect(google.tokensIssued).to.have.length(2)
    expect((await deliveries()).every(record => record.status === 'delivered')).to.equal(true)
  })

  it('records the identifiers Google refused, per operation, and delivers the rest', async () => {
    expect((await admin(beacon.url, 'PUT', url(), body())).status).to.equal(200)
    google.refusedIdentifiers.add(sha256Hex('bad@example.com'))
    await vip('p-4', { email: 'bad@example.com', tier: 'vip' })
    await until('settled', async () => (await deliveries())[0]?.status === 'delivered')
    expect((await deliveries())[0].attempts[0].error).to.contain('Google Ads refused 1 of 1 adds: operations[0].create: The SHA256 encoded value is malformed.')
  })

  it('dead-letters a revoked refresh token with a message saying to authorize again', async () => {
    google.refreshToken = 'another'
    expect((await admin(beacon.url, 'PUT', url(), body())).status).to.equal(200)
    await vip('p-5', { email: 'c@example.com', tier: 'vip' })
    await until('dead', async () => (await deliveries())[0]?.status === 'dead')
    expect((await deliveries())[0].attempts[0].error).to.contain('invalid_grant').and.to.contain('authorize again')
  })
})
