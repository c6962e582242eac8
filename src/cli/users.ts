// `beacon users add`: a panel user of an account (the admin key creates an account's first owner). The
// password is generated here and printed once; the server keeps only its scrypt hash.

import { ROLES } from '../users/users.js'
import { generatePassword } from '../users/password.js'
import { segment, type AdminClient } from './client.js'
import { UsageError } from './errors.js'
import { pretty } from './accounts.js'
import type { Output } from './admin-key.js'

export interface UserSpec {
  account: string
  email: string
  role: string
  name?: string
}

export async function usersAdd (client: AdminClient, spec: UserSpec, output: Output): Promise<void> {
  if (!(ROLES as readonly string[]).includes(spec.role)) throw new UsageError(`--role: expected one of ${ROLES.join(', ')}`)
  const password = generatePassword()
  const body: Record<string, unknown> = { email: spec.email, password, role: spec.role }
  if (spec.name !== undefined) body.name = spec.name
  const user = await client.request<Record<string, unknown>>('POST', `/admin/accounts/${segment(spec.account)}/users`, body)
  output.out(pretty({ ...user, password }))
  output.err('The password is shown once; the user signs in with it at /panel/ and an owner can change it.\n')
}
