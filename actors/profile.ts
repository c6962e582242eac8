// The profile actor (CDP): one known person of one account, with the devices (visitors) linked to it.

import type { Store } from '../src/store/store.js'
import { applyAttributes, applySegments, queryEntity, type AttributeValue, type EntityQuery, type EntityState } from './entity.js'
import type { Actor, ActorKind } from './runtime.js'

/** Devices kept per profile; the oldest link is dropped past this. */
export const PROFILE_VISITORS_MAX = 1000

export interface ProfileState extends EntityState {
  visitors: string[]
}

export type ProfileMessage =
  | { type: 'attributes', attributes: Record<string, AttributeValue | null> }
  | { type: 'segments', assign: string[], remove: string[] }
  | { type: 'link', visitorId: string }
  | { type: 'unlink', visitorId: string }
  | { type: 'query', query: EntityQuery }
  | { type: 'snapshot' }
  /** The profile's own attributes, read-only, for matching a linked visitor's events. */
  | { type: 'own-attributes' }

export type ProfileKind = ActorKind<ProfileState, ProfileMessage, unknown>

export function profileKind (store: Store): ProfileKind {
  const db = store.profiles

  function save (actor: Actor<ProfileState>): void {
    actor.track(store.durable(db.put([actor.account, actor.id], actor.state)))
  }

  return {
    name: 'profile',
    load (account, id) {
      return (db.get([account, id]) as ProfileState | undefined) ?? { attributes: {}, segments: [], visitors: [] }
    },
    handle (actor, message) {
      const state = actor.state
      switch (message.type) {
        case 'attributes':
          applyAttributes(state, message.attributes)
          save(actor)
          return undefined
        case 'segments': {
          const segments = applySegments(state, message.assign, message.remove)
          save(actor)
          return segments
        }
        case 'link':
          if (!state.visitors.includes(message.visitorId)) {
            state.visitors.push(message.visitorId)
            if (state.visitors.length > PROFILE_VISITORS_MAX) state.visitors.shift()
            save(actor)
          }
          return undefined
        case 'unlink': {
          const at = state.visitors.indexOf(message.visitorId)
          if (at >= 0) {
            state.visitors.splice(at, 1)
            save(actor)
          }
          return undefined
        }
        case 'query':
          return queryEntity(state, message.query)
        case 'snapshot':
          return structuredClone(state)
        case 'own-attributes':
          return state.attributes
      }
    },
  }
}
