// A destination's configuration: the body the admin API takes, checked once per save. The shared
// fields and each type's settings and credentials are TypeBox schemas compiled once, at start (one
// validator per type); a bad field is a 400 naming it (`/settings/pixelId`). Credentials are
// write-only: a save that omits them keeps the saved ones, only while apiBaseUrl keeps its origin.

import Type, { type TObject, type TSchema } from 'typebox'
import { ApiError, errorItem, type ErrorItem } from '../errors.js'
import { NAME_PATTERN } from '../patterns.js'
import { validator, type Validator } from '../validator.js'
import { refuseKeptSecretsOnNewTarget, secretsTarget } from '../webhooks/kept-secrets.js'
import { literalRefusal } from '../webhooks/ssrf.js'
import { DESTINATION_LIMITS } from './limits.js'
import { PURPOSES, type ProviderDefinition, type Purpose } from './provider.js'
import { PROVIDERS, PROVIDER_TYPES } from './providers.js'

const Name = Type.String({ pattern: NAME_PATTERN })
const Names = Type.Array(Name, { maxItems: DESTINATION_LIMITS.namesMax })

/** Settings every type accepts. */
const SharedSettings = {
  apiBaseUrl: Type.Optional(Type.String({ pattern: '^https?://[^/?#]+(/[^?#]*)?$', maxLength: DESTINATION_LIMITS.settingLengthMax, description: 'Where requests go instead of the provider (a proxy, a test double); under the webhook SSRF rules.' })),
  emailAttribute: Type.Optional(Type.String({ pattern: NAME_PATTERN, description: 'The attribute holding the email (default email).' })),
  phoneAttribute: Type.Optional(Type.String({ pattern: NAME_PATTERN, description: 'The attribute holding the phone (default phone).' })),
  phoneCountryCode: Type.Optional(Type.String({ pattern: '^[1-9][0-9]{0,3}$', description: 'Country code given to national phone numbers (a leading 0); without it they are not sent.' })),
  requireConsent: Type.Optional(Type.Boolean({ description: 'Send only for people whose consent attribute holds the purpose.' })),
  consentAttribute: Type.Optional(Type.String({ pattern: NAME_PATTERN, description: 'The attribute holding the purposes consented to (default consent).' })),
  timeoutMs: Type.Optional(Type.Integer({ minimum: 100, maximum: 60_000 })),
  maxAttempts: Type.Optional(Type.Integer({ minimum: 1, maximum: 50 })),
  ratePerSecond: Type.Optional(Type.Integer({ minimum: 1, maximum: 100_000, description: 'Requests a second at most.' })),
}

export const DestinationBodySchema = Type.Object({
  type: Type.Union(PROVIDER_TYPES.map(type => Type.Literal(type))),
  name: Type.String({ minLength: 1, maxLength: 200 }),
  enabled: Type.Boolean(),
  events: Type.Optional(Names),
  audiences: Type.Optional(Names),
  purpose: Type.Optional(Type.Union(PURPOSES.map(purpose => Type.Literal(purpose)))),
  credentials: Type.Optional(Type.Record(Type.String({ pattern: '^[A-Za-z0-9_]{1,64}$' }), Type.String({ maxLength: DESTINATION_LIMITS.credentialLengthMax }), { maxProperties: 20 })),
  settings: Type.Optional(Type.Object({}, { additionalProperties: true })),
}, { additionalProperties: false })

/** A PATCH: every field optional; settings and credentials merge into the saved ones. */
export const DestinationPatchSchema = Type.Partial(DestinationBodySchema)

export interface DestinationConfig {
  type: string
  name: string
  enabled: boolean
  events: string[]
  audiences: string[]
  purpose: Purpose
  settings: Record<string, unknown>
  credentials: Record<string, string>
}

/** The shared settings, read with their defaults. */
export interface SharedSettingValues {
  apiBaseUrl: string
  emailAttribute: string
  phoneAttribute: string
  phoneCountryCode: string | null
  requireConsent: boolean
  consentAttribute: string
  timeoutMs: number
  maxAttempts: number
  ratePerSecond: number | null
}

const validateBody = validator(DestinationBodySchema)
const validatePatch = validator(DestinationPatchSchema)

/** Each type's settings schema: its own settings, then the shared ones. */
const SETTINGS_SCHEMAS: ReadonlyMap<string, TObject> = new Map(PROVIDER_TYPES.map(type => {
  const provider = PROVIDERS.get(type)!
  return [type, Type.Object({ ...(provider.settings as TObject).properties, ...SharedSettings }, { additionalProperties: false })]
}))

/** The settings a type takes, as JSON Schema: what the panel's form is made from. */
export function settingsSchemaOf (type: string): TObject {
  return SETTINGS_SCHEMAS.get(type)!
}

/** One settings and one credentials validator per type, compiled once. */
const TYPE_VALIDATORS: ReadonlyMap<string, { settings: Validator<Record<string, unknown>>, credentials: Validator<Record<string, string>> }> = new Map(
  PROVIDER_TYPES.map(type => {
    const provider = PROVIDERS.get(type)!
    return [type, { settings: validator(SETTINGS_SCHEMAS.get(type)!) as Validator<Record<string, unknown>>, credentials: validator(provider.credentials) as Validator<Record<string, string>> }]
  })
)

export function sharedSettings (config: DestinationConfig, provider: ProviderDefinition<never, never>): SharedSettingValues {
  const s = config.settings
  return {
    apiBaseUrl: (typeof s.apiBaseUrl === 'string' ? s.apiBaseUrl : provider.apiBaseUrl).replace(/\/+$/, ''),
    emailAttribute: typeof s.emailAttribute === 'string' ? s.emailAttribute : 'email',
    phoneAttribute: typeof s.phoneAttribute === 'string' ? s.phoneAttribute : 'phone',
    phoneCountryCode: typeof s.phoneCountryCode === 'string' ? s.phoneCountryCode : null,
    requireConsent: s.requireConsent === true,
    consentAttribute: typeof s.consentAttribute === 'string' ? s.consentAttribute : 'consent',
    timeoutMs: typeof s.timeoutMs === 'number' ? s.timeoutMs : DESTINATION_LIMITS.timeoutMsDefault,
    maxAttempts: typeof s.maxAttempts === 'number' ? s.maxAttempts : DESTINATION_LIMITS.attemptsDefault,
    ratePerSecond: typeof s.ratePerSecond === 'number' ? s.ratePerSecond : null,
  }
}

export interface ValidateOptions {
  /** Whether apiBaseUrl may be a loopback or private literal (BEACON_WEBHOOK_ALLOW_PRIVATE). */
  allowPrivate: boolean
}

/**
 * The configuration a PUT (or, `patch`, a PATCH merged onto `stored`) saves. Credentials omitted keep
 * the stored ones while the origin of the requests stays the same; a new origin needs them again (400
 * naming them). A disabled destination may lack credentials (an import, a draft); an enabled one not.
 */
export function validateDestination (body: unknown, stored: DestinationConfig | null, options: ValidateOptions, patch = false): DestinationConfig {
  const given = patch ? validatePatch(body) : validateBody(body)
  const base = patch && stored !== null ? stored : null
  const type = given.type ?? base?.type
  if (type === undefined) throw new ApiError('invalid_field', 'type is required.', '/type')
  if (stored !== null && stored.type !== type) throw new ApiError('invalid_field', `type cannot change (${stored.type}); delete the destination and create it again.`, '/type')
  const provider = PROVIDERS.get(type)!
  const settings = given.settings === undefined ? { ...(base?.settings ?? {}) } : patch ? { ...(base?.settings ?? {}), ...given.settings } : { ...given.settings }
  const validators = TYPE_VALIDATORS.get(type)!
  prefixed('/settings', () => validators.settings(settings))
  const config: DestinationConfig = {
    type,
    name: given.name ?? base!.name,
    enabled: given.enabled ?? base!.enabled,
    events: given.events ?? base?.events ?? [],
    audiences: given.audiences ?? base?.audiences ?? [],
    purpose: given.purpose ?? base?.purpose ?? provider.purpose,
    settings,
    credentials: {},
  }
  const problems: ErrorItem[] = []
  if (config.events.length > 0 && !provider.takes.events) problems.push(errorItem('invalid_field', '/events', `${type} takes no events (audiences only).`))
  if (config.audiences.length > 0 && !provider.takes.audiences) problems.push(errorItem('invalid_field', '/audiences', `${type} takes no audiences (events only).`))
  if (problems.length > 0) throw ApiError.of(problems)
  const apiBaseUrl = sharedSettings(config, provider as ProviderDefinition<never, never>).apiBaseUrl
  if (!options.allowPrivate) {
    const refused = literalRefusal(new URL(apiBaseUrl).hostname)
    if (refused !== null) throw new ApiError('invalid_field', refused.message.replace('webhook target', 'apiBaseUrl'), '/settings/apiBaseUrl')
    for (const url of provider.extraUrls?.(settings) ?? []) {
      const extra = literalRefusal(new URL(url).hostname)
      if (extra !== null) throw new ApiError('invalid_field', extra.message.replace('webhook target', url), '/settings')
    }
  }
  // Credentials: the ones sent, the stored ones for those omitted (same origin only).
  const sent = given.credentials ?? {}
  const kept: string[] = []
  const credentials: Record<string, string> = {}
  for (const [name, value] of Object.entries(stored?.credentials ?? {})) {
    if (Object.hasOwn(sent, name)) continue
    credentials[name] = value
    kept.push('/credentials/' + name)
  }
  Object.assign(credentials, sent)
  for (const name of Object.keys(credentials)) if (credentials[name] === '') delete credentials[name]
  if (stored !== null) {
    const storedProvider = PROVIDERS.get(stored.type)!
    refuseKeptSecretsOnNewTarget(kept, targetOf(stored, storedProvider), targetOf(config, provider))
  }
  if (config.enabled || Object.keys(credentials).length > 0) prefixed('/credentials', () => validators.credentials(credentials))
  config.credentials = credentials
  return config
}

/** The configuration as the API shows it: credentials never, only which are set. */
export function destinationView (config: DestinationConfig): Omit<DestinationConfig, 'credentials'> & { credentialsSet: string[] } {
  const { credentials, ...rest } = config
  return { ...rest, credentialsSet: Object.keys(credentials).sort() }
}

/** Seal or open every credential (at rest, credentials are sealed like webhook secrets). */
export function mapCredentials (config: DestinationConfig, map: (secret: string) => string): DestinationConfig {
  return { ...config, credentials: Object.fromEntries(Object.entries(config.credentials).map(([name, value]) => [name, map(value)])) }
}

/** Where the credentials go: the API's origin, and those of the type's other URLs (an OAuth token endpoint). */
function targetOf (config: DestinationConfig, provider: ProviderDefinition<never, never>): string | null {
  return secretsTarget([sharedSettings(config, provider).apiBaseUrl, ...(provider.extraUrls?.(config.settings) ?? [])])
}

function prefixed (prefix: string, check: () => unknown): void {
  try {
    check()
  } catch (error) {
    if (!(error instanceof ApiError)) throw error
    throw ApiError.of(error.items.map(item => ({ ...item, field: prefix + (item.field ?? '') })), error.message)
  }
}

export type { TSchema }
