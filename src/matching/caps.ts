// Frequency caps. Per visitor per campaign the caller stores an ImpressionHistory:
// `n` counts impressions ever shown; `t` keeps the timestamps still inside the cap's window,
// pruned on every write and never more than `cap.max` of them (older ones cannot matter: once
// `max` newer impressions sit in the window the campaign is capped anyway).
// Windows slide: an impression at time t counts while nowMs - t < window, i.e. it stops
// counting exactly `window` ms later. Lifetime caps use `n` only.

import type { CapPeriod, FrequencyCap, ImpressionHistory } from './types.js'

export const CAP_WINDOW_MS: Readonly<Record<Exclude<CapPeriod, 'lifetime'>, number>> = {
  hour: 3_600_000,
  day: 86_400_000,
  week: 604_800_000,
}

/** True when showing the campaign again would exceed its cap. No cap or no history: false. */
export function isCapped (cap: FrequencyCap | null | undefined, history: ImpressionHistory | null | undefined, nowMs: number): boolean {
  if (cap == null || history == null) return false
  if (cap.per === 'lifetime') return history.n >= cap.max
  const sinceMs = nowMs - CAP_WINDOW_MS[cap.per]
  let inWindow = 0
  for (const t of history.t) if (t > sinceMs) inWindow++
  return inWindow >= cap.max
}

/** The history after one more impression at nowMs; the input is not modified. */
export function recordImpression (history: ImpressionHistory | null | undefined, cap: FrequencyCap | null | undefined, nowMs: number): ImpressionHistory {
  const n = (history?.n ?? 0) + 1
  if (cap == null || cap.per === 'lifetime') return { n, t: [] }
  const sinceMs = nowMs - CAP_WINDOW_MS[cap.per]
  const t = (history?.t ?? []).filter(x => x > sinceMs)
  t.push(nowMs)
  return { n, t: t.length > cap.max ? t.slice(t.length - cap.max) : t }
}
