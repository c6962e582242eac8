// The campaign as the panel reads and edits it (the admin API's campaign body).

import type { Condition } from '../condition'
import type { ExperimentFields } from './experiment'

export interface Campaign {
  name: string
  status: 'active' | 'paused'
  priority: number
  startsAt?: string
  endsAt?: string
  trigger: { events?: string[], platforms?: string[], devices?: string[], paths?: string[] }
  rule?: Condition
  frequencyCap?: { max: number, per: string }
  content: unknown
  variants?: ExperimentFields['variants']
  goals?: ExperimentFields['goals']
  trafficPercent?: number
  allocation?: 'fixed' | 'bandit'
}
