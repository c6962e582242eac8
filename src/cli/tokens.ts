// `beacon tokens create|list|revoke`. The created token's secret is printed once, as the server shows it
// once; nothing else ever prints a secret.

import { ACCESS, type Access } from '../auth/tokens.js'
import { listAll, segment, type AdminClient } from './client.js'
import { UsageError } from './errors.js'
import { pretty } from './accounts.js'
import type { Output } from './admin-key.js'

export interface TokenSpec {
  account: string
  name: string
  attributes: string
  access: string
  rate?: string
}

export async function tokensCreate (client: AdminClient, spec: TokenSpec, output: Output): Promise<void> {
  const attributes = spec.attributes.split(',').map(name => name.trim()).filter(name => name !== '')
  if (attributes.length === 0) throw new UsageError('--attributes: name the attributes the token may use, comma-separated, or * for all')
  if (!(ACCESS as readonly string[]).includes(spec.access)) throw new UsageError(`--access: expected one of ${ACCESS.join(', ')}`)
  const body: Record<string, unknown> = { name: spec.name, attributes, access: spec.access as Access }
  if (spec.rate !== undefined) {
    const rate = Number(spec.rate)
    if (!Number.isInteger(rate) || rate < 1) throw new UsageError('--rate: expected a whole number of requests per second, 1 or more')
    body.ratePerSecond = rate
  }
  output.out(pretty(await client.request('POST', `/admin/accounts/${segment(spec.account)}/tokens`, body)))
}

export async function tokensList (client: AdminClient, account: string, output: Output): Promise<void> {
  output.out(pretty({ tokens: await listAll(client, `/admin/accounts/${segment(account)}/tokens`, 'tokens') }))
}

export async function tokensRevoke (client: AdminClient, account: string, id: string, output: Output): Promise<void> {
  output.out(pretty(await client.request('DELETE', `/admin/accounts/${segment(account)}/tokens/${segment(id)}`)))
}
