// The few components every page is made of: a page frame, a labelled form field, a table, loading and
// error states, an action button that shows its progress and failure, and a copy button.

import { cloneElement, type ComponentChildren, type JSX, type VNode } from 'preact'
import { useCallback, useEffect, useId, useRef, useState } from 'preact/hooks'
import { BASE, onLink, route } from './router'

export function Page ({ title, actions, children }: { title: string, actions?: ComponentChildren, children: ComponentChildren }): JSX.Element {
  const heading = useRef<HTMLHeadingElement>(null)
  useEffect(() => { document.title = `${title} · Beacon` }, [title])
  // A new page (not a new title: the campaign editor's follows its name as it is typed) takes the focus.
  useEffect(() => { heading.current?.focus() }, [route.value])
  return (
    <section class='page'>
      <header class='page-head'>
        <h1 tabIndex={-1} ref={heading}>{title}</h1>
        {actions !== undefined && <div class='actions'>{actions}</div>}
      </header>
      {children}
    </section>
  )
}

export function Link ({ to, children, class: className, current }: { to: string, children: ComponentChildren, class?: string, current?: boolean }): JSX.Element {
  return <a href={BASE + to} onClick={onLink} class={className} aria-current={current === true ? 'page' : undefined}>{children}</a>
}

/** A label for its one control (named by the label, described by the hint), the hint below it. */
export function Field ({ label, hint, children, wide }: { label: string, hint?: string, children: VNode<any>, wide?: boolean }): JSX.Element {
  const id = useId()
  const control = cloneElement(children, { id, 'aria-describedby': hint === undefined ? undefined : `${id}-hint` })
  return (
    <div class={wide === true ? 'field wide' : 'field'}>
      <label class='label' for={id}>{label}</label>
      {control}
      {hint !== undefined && <small class='hint' id={`${id}-hint`}>{hint}</small>}
    </div>
  )
}

export interface Column<T> {
  head: string
  cell: (row: T) => ComponentChildren
  /** A number: right-aligned, digits of equal width. */
  num?: boolean
}

export function Table<T> ({ caption, columns, rows, empty }: { caption: string, columns: Column<T>[], rows: T[], empty: string }): JSX.Element {
  if (rows.length === 0) return <p class='empty'>{empty}</p>
  return (
    <div class='table-wrap'>
      <table>
        <caption class='sr-only'>{caption}</caption>
        <thead><tr>{columns.map(c => <th scope='col' key={c.head} class={c.num === true ? 'num' : undefined}>{c.head}</th>)}</tr></thead>
        <tbody>
          {rows.map((row, i) => <tr key={i}>{columns.map(c => <td key={c.head} data-head={c.head} class={c.num === true ? 'num' : undefined}>{c.cell(row)}</td>)}</tr>)}
        </tbody>
      </table>
    </div>
  )
}

export function ErrorNote ({ error }: { error: unknown }): JSX.Element | null {
  if (error == null) return null
  return <p class='error' role='alert'>{error instanceof Error ? error.message : String(error)}</p>
}

export function Loading ({ what }: { what: string }): JSX.Element {
  return <p class='loading' role='status'><span class='spinner' aria-hidden='true' />Loading {what}…</p>
}

export interface Load<T> {
  data: T | undefined
  error: unknown
  loading: boolean
  reload: () => void
}

/**
 * Runs `load` when `deps` change (and on reload); the last answer wins. A reload keeps showing the data
 * it replaces; new deps do not (the data of another record would be shown as this one's).
 */
export function useLoad<T> (load: () => Promise<T>, deps: unknown[]): Load<T> {
  const [state, setState] = useState<{ data: T | undefined, error: unknown, loading: boolean }>({ data: undefined, error: null, loading: true })
  const [tick, setTick] = useState(0)
  const loadedDeps = useRef<unknown[] | null>(null)
  const sameDeps = loadedDeps.current !== null && deps.every((dep, i) => Object.is(dep, loadedDeps.current![i]))
  useEffect(() => {
    let live = true
    loadedDeps.current = deps
    setState(s => ({ data: sameDeps ? s.data : undefined, loading: true, error: null }))
    load().then(data => { if (live) setState({ data, error: null, loading: false }) },
      (error: unknown) => { if (live) setState(s => ({ data: s.data, error, loading: false })) })
    return () => { live = false }
  }, [...deps, tick])
  const reload = useCallback(() => setTick(t => t + 1), [])
  return { ...state, data: sameDeps ? state.data : undefined, reload }
}

/** The loading and error states of `load`, then `children` with its data. */
export function Loaded<T> ({ load, what, children }: { load: Load<T>, what: string, children: (data: T) => ComponentChildren }): JSX.Element {
  if (load.data === undefined) return load.error != null ? <ErrorNote error={load.error} /> : <Loading what={what} />
  return <>{load.error != null && <ErrorNote error={load.error} />}{children(load.data)}</>
}

export interface Action<A = void> {
  busy: boolean
  error: unknown
  done: string | null
  /** Start the work: with its argument, or as a form's submit handler (the event is not passed on). */
  run: (arg?: A | Event) => void
}

/** A button's or form's work: busy while it runs, its failure or its success message shown after. */
export function useAction<A = void> (work: (arg: A) => Promise<string | void>): Action<A> {
  const [state, setState] = useState<{ busy: boolean, error: unknown, done: string | null }>({ busy: false, error: null, done: null })
  const run = (arg?: A | Event): void => {
    if (arg instanceof Event) arg.preventDefault()
    setState({ busy: true, error: null, done: null })
    work((arg instanceof Event ? undefined : arg) as A).then(done => setState({ busy: false, error: null, done: done ?? null }), (error: unknown) => setState({ busy: false, error, done: null }))
  }
  return { ...state, run }
}

/** The outcome of an action, announced to screen readers. */
export function Outcome ({ action }: { action: Action<any> }): JSX.Element {
  return (
    <div class='outcome' aria-live='polite'>
      {action.busy && <span class='loading'><span class='spinner' aria-hidden='true' />Working…</span>}
      {action.done !== null && <span class='done'>{action.done}</span>}
      <ErrorNote error={action.error} />
    </div>
  )
}

export function CopyButton ({ text, label = 'Copy' }: { text: string, label?: string }): JSX.Element {
  const [copied, setCopied] = useState(false)
  const copy = (): void => {
    navigator.clipboard.writeText(text).then(() => setCopied(true), () => setCopied(false))
  }
  return <button type='button' class='secondary' onClick={copy}>{copied ? 'Copied' : label}</button>
}

/** Comma-separated text ⇄ list of names. */
export const toList = (text: string): string[] => text.split(',').map(s => s.trim()).filter(s => s !== '')
export const fromList = (list: readonly string[] | undefined): string => (list ?? []).join(', ')

export function formatTime (at: string | number | null | undefined): string {
  if (at == null || at === '') return '—'
  const date = new Date(at)
  return Number.isNaN(date.getTime()) ? String(at) : date.toISOString().replace('T', ' ').slice(0, 19) + ' UTC'
}
