// `beacon accounts create|list`: the admin API's accounts, answers printed as JSON.

import { listAll, type AdminClient } from './client.js'
import type { Output } from './admin-key.js'

export async function accountsCreate (client: AdminClient, name: string, output: Output): Promise<void> {
  output.out(pretty(await client.request('POST', '/admin/accounts', { name })))
}

export async function accountsList (client: AdminClient, output: Output): Promise<void> {
  output.out(pretty({ accounts: await listAll(client, '/admin/accounts', 'accounts') }))
}

export function pretty (value: unknown): string {
  return JSON.stringify(value, null, 2) + '\n'
}
