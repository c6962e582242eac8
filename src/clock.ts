// Time is injected so that tests can drive windows, caps and schedules without sleeping.

export interface Clock {
  nowMs (): number
}

export const systemClock: Clock = { nowMs: Date.now }
