// Decides where each campaign is filed: under one of its keys (index-keys.ts) or in the trigger
// tree. An event tests every campaign filed where it looks, so the expected work per event is
// the sum over campaigns of the chance that an event reaches the campaign's place, and each
// campaign is best filed where that chance is smallest — independently of the others.
// Without event statistics, values are taken as equally likely: a key on a field whose
// campaigns name d distinct values is reached with chance 1/(d + 1) per value (the +1 stands
// for every value no campaign names, or none). So a sku key among thousands of skus beats the
// tree, a key on a yes/no attribute rarely does, and the tree's chance is the product over the
// trigger dimensions the campaign restricts.

import { fieldKeys, pathKey, type FieldKey, type IndexKey } from './index-keys.js'
import type { CampaignDef } from './types.js'

const DIMENSIONS = ['events', 'platforms', 'devices'] as const

export function groupId (key: FieldKey): string {
  return (key.source === 'event' ? 'e:' : 'a:') + key.field
}

export function candidateKeys (def: CampaignDef): IndexKey[] {
  const keys: IndexKey[] = fieldKeys(def.rule)
  const path = pathKey(def.trigger.paths)
  if (path !== null) keys.push(path)
  return keys
}

// Distinct values per group; "1" and 1 are different values, as in the index.
class Distinct {
  private readonly groups = new Map<string, Set<string>>()
  add (group: string, value: unknown): void {
    let set = this.groups.get(group)
    if (set === undefined) this.groups.set(group, set = new Set())
    set.add(typeof value + ':' + String(value))
  }

  chance (group: string): number {
    return 1 / ((this.groups.get(group)?.size ?? 0) + 1)
  }
}

/** Each campaign's place (null: the tree), pausing every `step` campaigns of each pass (compile-campaigns.ts). */
export function * planIndexSteps (defs: readonly CampaignDef[], keys: readonly IndexKey[][], step: number): Generator<void, Array<IndexKey | null>, void> {
  const distinct = new Distinct()
  for (let i = 0; i < defs.length; i++) {
    const def = defs[i]!
    for (const dim of DIMENSIONS) for (const v of def.trigger[dim] ?? []) distinct.add(dim, v)
    if (i % step === step - 1) yield
  }
  for (let i = 0; i < keys.length; i++) {
    for (const key of keys[i]!) {
      if (key.kind === 'field') for (const v of key.values) distinct.add(groupId(key), v)
      else {
        for (const p of key.exact) distinct.add('path=', p)
        for (const p of key.prefixes) distinct.add('path/', p)
      }
    }
    if (i % step === step - 1) yield
  }
  const reach = (key: IndexKey): number => key.kind === 'field'
    ? key.values.length * distinct.chance(groupId(key))
    : key.exact.length * distinct.chance('path=') + key.prefixes.length * distinct.chance('path/')

  const places: Array<IndexKey | null> = []
  for (let i = 0; i < defs.length; i++) {
    const def = defs[i]!
    let best: IndexKey | null = null
    let bestReach = 1
    for (const dim of DIMENSIONS) {
      const values = def.trigger[dim]
      if (values !== undefined) bestReach *= Math.min(1, new Set(values).size * distinct.chance(dim))
    }
    for (const key of keys[i] as IndexKey[]) {
      const r = reach(key)
      if (r < bestReach) { best = key; bestReach = r }
    }
    places.push(best)
    if (i % step === step - 1) yield
  }
  return places
}
