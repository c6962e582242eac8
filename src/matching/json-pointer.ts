// RFC 6901 pointers name the offending node in validation errors, e.g. "/rule/all/1/op".

/** Appends one reference token, escaping `~` and `/` as the RFC requires. */
export function pointer (base: string, token: string | number): string {
  return base + '/' + String(token).replace(/~/g, '~0').replace(/\//g, '~1')
}
