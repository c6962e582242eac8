// Erasure and export of a person (a profile) or of one anonymous device (a visitor). A profile keeps
// its latest devices only (PROFILE_VISITORS_MAX), so what follows a person is the uncapped links index
// (store.links: every visitor ever linked), together with the profile's own list (profiles linked
// before the index existed). A device linked to another profile since belongs to that person: it is
// kept, only its link to the erased profile goes.
//
// Cluster mode: the devices may sit in partitions other nodes own; every message goes through the actor
// router (`peers`, actors/actor-router.ts), which runs it at the owner of its key. The links index is each
// node's own: `links` (src/store/profile-links.ts) asks every live node for its rows of the profile, and
// the owner of each visitor's partition holds that visitor's row (a node not answering: 503, before
// anything is erased). Rows a former owner kept are harmless: the device they name is erased only if it
// is still linked to this profile or to none. The person's delivery records are erased
// through `deliveries`: this node's (embedded mode), or every node's (cluster mode:
// src/delivery/cluster-erasures.ts, which may refuse with 503 `unavailable` once the actors' erases are
// done). So that a retry of the request still erases them, that step comes before the links go (a
// retry finds the devices through them) and runs for a visitor found erased already.

import type { Store } from '../store/store.js'
import type { Clock } from '../clock.js'
import type { ActorRuntime } from '../../actors/runtime.js'
import type { ActorSender } from '../../actors/actor-router.js'
import type { VisitorKind, VisitorState } from '../../actors/visitor.js'
import type { ProfileKind, ProfileState } from '../../actors/profile.js'
import type { DeliveryHub } from '../delivery/hub.js'
import type { ProfileLinks } from '../store/profile-links.js'
import type { EventLog } from '../store/event-log.js'

/** Devices erased at once (each its own actor message and write). */
const ERASE_CONCURRENCY = 32

export interface ErasureDeps {
  store: Store
  runtime: ActorRuntime
  visitors: VisitorKind
  profiles: ProfileKind
  /** The hub (embedded mode), or the cluster's erasures (src/delivery/cluster-erasures.ts). */
  deliveries: Pick<DeliveryHub, 'forget'>
  clock: Clock
  /** The links index: this node's (embedded mode), or every live node's (cluster mode). */
  links: Pick<ProfileLinks, 'of'>
  /** Cluster mode: the actor router (messages run at their key's owner). Absent: the runtime. */
  peers?: ActorSender | null
  /** The retained event log, whose events of the person go too (src/store/event-log.ts); null: none kept. */
  events?: Pick<EventLog, 'forget'> | null
}

export interface ProfileErased {
  /** Whether there was anything under this id (a profile row, or devices linked to it). */
  found: boolean
  /** Whether the profile's own record existed. */
  profile: boolean
  visitors: number
  /** Devices once linked that belong to another profile now: kept. */
  keptVisitors: number
  deliveries: number
  /** Events removed from the retained event log. */
  events: number
}

export class Erasure {
  private readonly deps: ErasureDeps
  private readonly actors: ActorSender

  constructor (deps: ErasureDeps) {
    this.deps = deps
    this.actors = deps.peers ?? deps.runtime
  }

  /** Every visitor id ever linked to the profile: the index and the profile's own list. */
  async linkedVisitors (account: string, profileId: string, own: readonly string[]): Promise<string[]> {
    return [...new Set([...own, ...await this.deps.links.of(account, profileId)])]
  }

  /** The profile, and every device still linked to it: what export shows. */
  async exportProfile (account: string, profileId: string): Promise<{ profile: ProfileState, visitors: { id: string, state: VisitorState }[] }> {
    const { visitors, profiles } = this.deps
    const runtime = this.actors
    const profile = await runtime.send(profiles, account, profileId, { type: 'snapshot' })
    const devices: { id: string, state: VisitorState }[] = []
    for (const id of await this.linkedVisitors(account, profileId, profile.visitors)) {
      const state = await runtime.send(visitors, account, id, { type: 'snapshot' })
      if (state.profileId === profileId) devices.push({ id: visitors.key?.(id) ?? id, state })
    }
    return { profile, visitors: devices }
  }

  async eraseProfile (account: string, profileId: string): Promise<ProfileErased> {
    const { store, visitors, profiles, deliveries } = this.deps
    const runtime = this.actors
    const profile = await runtime.send(profiles, account, profileId, { type: 'snapshot' })
    // Devices first: one erased later could otherwise send its data to the profile again.
    const erased = new Set<string>()
    const kept = new Set<string>()
    const ids = await this.linkedVisitors(account, profileId, profile.visitors)
    for (let i = 0; i < ids.length; i += ERASE_CONCURRENCY) {
      const chunk = ids.slice(i, i + ERASE_CONCURRENCY)
      const results = await Promise.all(chunk.map(id => runtime.send(visitors, account, id, { type: 'erase', ofProfile: profileId })))
      results.forEach((result, j) => {
        if (result.kept) kept.add(chunk[j]!)
        else if (result.existed) erased.add(chunk[j]!)
      })
    }
    const had = await runtime.send(profiles, account, profileId, { type: 'erase' })
    const removed = await deliveries.forget(account, new Set([profileId]), new Set(ids.filter(id => !kept.has(id))))
    // The person's events: those of the devices erased, and those a kept device sent while linked to this profile.
    const events = await this.forgetEvents(account, new Set(ids.filter(id => !kept.has(id))), new Set([profileId]))
    let last: Promise<boolean> | null = null
    for (const id of ids) last = store.links.remove([account, profileId, id])
    if (last !== null) await store.durable(last)
    return { found: had !== null || erased.size > 0 || kept.size > 0, profile: had !== null, visitors: erased.size, keptVisitors: kept.size, deliveries: removed, events }
  }

  private forgetEvents (account: string, visitors: ReadonlySet<string>, profiles: ReadonlySet<string>): Promise<number> {
    const log = this.deps.events ?? null
    return log === null ? Promise.resolve(0) : log.forget(account, visitors, profiles)
  }

  /** Erase one device; a linked one is also dropped from its profile's copy. Null: never seen. */
  async eraseVisitor (account: string, visitorId: string): Promise<{ profileId: string | null, deliveries: number, events: number } | null> {
    const { visitors, profiles, deliveries, clock } = this.deps
    const runtime = this.actors
    const result = await runtime.send(visitors, account, visitorId, { type: 'erase' })
    if (!result.existed) {
      // Erased already, perhaps by a request that failed after it (its delivery records not all erased): they go now.
      await deliveries.forget(account, NO_IDS, new Set([visitorId]))
      await this.forgetEvents(account, new Set([visitorId]), NO_IDS)
      return null
    }
    if (result.profileId !== null) {
      await runtime.send(profiles, account, result.profileId, { type: 'unlink', visitorId, nowMs: clock.nowMs(), forget: true })
    }
    const removed = await deliveries.forget(account, NO_IDS, new Set([visitorId]))
    const events = await this.forgetEvents(account, new Set([visitorId]), NO_IDS)
    return { profileId: result.profileId, deliveries: removed, events }
  }
}

const NO_IDS: ReadonlySet<string> = new Set()
