// Verified identity: a browser may name a profileId only with proof from the site's backend, the hex
// HMAC-SHA256 of the profileId under the account's identity secret. Without it anyone could send any
// profileId and have their device stitched into that person's profile (reading campaigns aimed at the
// person, polluting the profile). After a rotation the previous secret stays valid until a deadline.

import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'

/** What the account record keeps of its identity secrets (sealed at rest by the store's secret box). */
export interface IdentitySecrets {
  current: string
  currentSince: string
  previous: string | null
  /** ISO time after which `previous` is refused (null when there is none). */
  previousUntil: string | null
}

const PREFIX = 'bis_'

export function newIdentitySecret (): string {
  return PREFIX + randomBytes(32).toString('base64url')
}

/** The hex HMAC-SHA256 of `profileId` under `secret`: what a site's backend computes. */
export function signProfileId (secret: string, profileId: string): string {
  return createHmac('sha256', secret).update(profileId).digest('hex')
}

/** Checks signatures with the secrets held in memory (opened once, when the account changes). */
export class IdentityVerifier {
  private readonly current: string
  private readonly previous: string | null
  private readonly previousUntilMs: number

  /** `secrets` as stored; `open` turns a stored secret into the plain one. */
  constructor (secrets: IdentitySecrets, open: (stored: string) => string) {
    this.current = open(secrets.current)
    this.previous = secrets.previous === null ? null : open(secrets.previous)
    this.previousUntilMs = secrets.previousUntil === null ? 0 : Date.parse(secrets.previousUntil)
  }

  /** `signature` is 64 hex characters (the schema checked it); compared in constant time. */
  verify (profileId: string, signature: string, nowMs: number): boolean {
    const presented = Buffer.from(signature, 'hex')
    if (presented.length !== 32) return false
    if (matches(this.current, profileId, presented)) return true
    return this.previous !== null && nowMs < this.previousUntilMs && matches(this.previous, profileId, presented)
  }
}

function matches (secret: string, profileId: string, presented: Buffer): boolean {
  return timingSafeEqual(createHmac('sha256', secret).update(profileId).digest(), presented)
}
