// How deep a JSON value nests, counted only up to a bound: free-form values (a campaign's content)
// are stored with msgpackr and copied by recursive code, which overflowed the stack on 1,500 levels
// (a 500, issue 27), so their depth is bounded when they are validated.

/** Levels of objects and arrays a free-form stored value may nest (the value itself is level 1). */
export const JSON_DEPTH_MAX = 32

/** Whether `value` nests objects and arrays deeper than `max` levels; its own stack, stops at max + 1. */
export function nestsDeeper (value: unknown, max: number): boolean {
  const stack: Array<{ value: unknown, depth: number }> = [{ value, depth: 1 }]
  for (let at = stack.pop(); at !== undefined; at = stack.pop()) {
    if (typeof at.value !== 'object' || at.value === null) continue
    if (at.depth > max) return true
    for (const child of Object.values(at.value)) if (typeof child === 'object' && child !== null) stack.push({ value: child, depth: at.depth + 1 })
  }
  return false
}
