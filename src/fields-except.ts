// A copy of an object's fields but some, in one loop: what `const { a, b, ...rest } = object` does, on
// the event path. V8 runs object rest with excluded keys through its runtime (a property list, then a
// lookup per key); a batch of 100 events spent a third of its time there (bench/results/2026-11-28-event-path.md).

/** The own enumerable fields of `source` whose names are not in `excluded`, copied into `into`. */
export function fieldsExcept (source: object, excluded: ReadonlySet<string>, into: Record<string, unknown> = {}): Record<string, unknown> {
  const fields = source as Record<string, unknown>
  for (const name in fields) if (!excluded.has(name) && Object.hasOwn(fields, name)) into[name] = fields[name]
  return into
}
