// Client-side routes under /panel/: the path is a signal, links push history entries.

import { signal } from '@preact/signals'

export const BASE = '/panel/'

function current (): string {
  const path = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : ''
  return path.replace(/\/+$/, '')
}

/** The route: the path after /panel/, without a trailing slash ('' is the home page). */
export const route = signal(current())

addEventListener('popstate', () => { route.value = current() })

export function navigate (path: string): void {
  history.pushState(null, '', BASE + path)
  route.value = current()
}

/** A click on an in-app link: navigate without reloading (modified clicks keep their usual meaning). */
export function onLink (event: MouseEvent): void {
  if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return
  const anchor = event.currentTarget as HTMLAnchorElement
  event.preventDefault()
  navigate(anchor.pathname.slice(BASE.length))
}
