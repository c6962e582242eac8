// Matched content is shared by every response that returns it, so it is copied once at compile
// time and frozen: a caller that mutates it by mistake gets a TypeError in strict mode instead
// of silently changing what every later visitor sees.

export function frozenJsonCopy (value: unknown): unknown {
  const text = JSON.stringify(value)
  return text === undefined ? null : deepFreeze(JSON.parse(text))
}

function deepFreeze (value: unknown): unknown {
  if (typeof value === 'object' && value !== null) {
    for (const child of Object.values(value)) deepFreeze(child)
    Object.freeze(value)
  }
  return value
}
