// The condition builder: all / any / not groups and {fact, op, value} leaves, edited as a tree, with a
// JSON view of the same rule kept in step (edit either; the JSON is applied once it parses).

import type { JSX } from 'preact'
import { useEffect, useState } from 'preact/hooks'
import { fromList, toList } from './ui'

export type Condition = { all: Condition[] } | { any: Condition[] } | { not: Condition } | Leaf
export interface Leaf { fact: string, op: string, value?: unknown, event?: string, within?: string, field?: string }

export const OPS = ['eq', 'ne', 'in', 'nin', 'gt', 'gte', 'lt', 'lte', 'contains', 'startsWith', 'endsWith', 'glob', 'exists']
export const FACTS = ['event.path', 'event.platform', 'event.device', 'event.sku', 'event.price', 'event.category', 'event.brand',
  'event.orderTotal', 'attribute.', 'segment', 'visitor.pageViews', 'visitor.productViews', 'visitor.purchases', 'visitor.totalSpent',
  'visitor.firstSeenSecondsAgo', 'visitor.lastSeenSecondsAgo', 'visitor.viewedSkus', 'visitor.purchasedSkus', 'visitor.viewedCategories',
  'time.hour', 'time.weekday', 'count', 'sum']

const NEW_LEAF: Leaf = { fact: 'event.path', op: 'eq', value: '/' }

type Kind = 'all' | 'any' | 'not' | 'leaf'
const kindOf = (c: Condition): Kind => 'all' in c ? 'all' : 'any' in c ? 'any' : 'not' in c ? 'not' : 'leaf'
const childrenOf = (c: Condition): Condition[] => 'all' in c ? c.all : 'any' in c ? c.any : 'not' in c ? [c.not] : []

function withKind (c: Condition, kind: Kind): Condition {
  const children = childrenOf(c)
  if (kind === 'leaf') return children[0] !== undefined && kindOf(children[0]) === 'leaf' ? children[0] : { ...NEW_LEAF }
  const list = children.length > 0 ? children : [c]
  if (kind === 'not') return { not: list[0]! }
  return kind === 'all' ? { all: list } : { any: list }
}

/** Text typed into a value box → the JSON value the operator takes. */
export function parseValue (op: string, text: string): unknown {
  if (op === 'exists') return text !== 'false'
  if (op === 'in' || op === 'nin') return toList(text).map(scalar)
  return scalar(text.trim())
}

function scalar (text: string): unknown {
  if (/^-?\d+(\.\d+)?$/.test(text)) return Number(text)
  if (text === 'true' || text === 'false') return text === 'true'
  return text
}

const formatValue = (value: unknown): string => Array.isArray(value) ? fromList(value.map(String)) : value === undefined ? '' : String(value)

interface NodeProps { node: Condition, onChange: (next: Condition) => void, onRemove?: () => void, label: string }

function Node ({ node, onChange, onRemove, label }: NodeProps): JSX.Element {
  const kind = kindOf(node)
  const remove = onRemove !== undefined && <button type='button' class='link danger' onClick={onRemove} aria-label={`Remove ${label}`}>Remove</button>
  if (kind === 'leaf') return <LeafRow leaf={node as Leaf} onChange={onChange} remove={remove} label={label} />
  const children = childrenOf(node)
  const setChildren = (list: Condition[]): void => onChange(kind === 'not' ? { not: list[0]! } : kind === 'all' ? { all: list } : { any: list })
  return (
    <fieldset class='group'>
      <legend class='sr-only'>{label}</legend>
      <div class='row'>
        <label class='inline'>
          <span class='label'>Match</span>
          <select aria-label={`${label}: match`} value={kind} onChange={e => onChange(withKind(node, e.currentTarget.value as Kind))}>
            <option value='all'>all of (and)</option>
            <option value='any'>any of (or)</option>
            <option value='not'>not</option>
            <option value='leaf'>a single condition</option>
          </select>
        </label>
        {remove}
      </div>
      <ul class='children'>
        {children.map((child, i) => (
          <li key={i}>
            <Node
              node={child} label={`${label}.${i + 1}`}
              onChange={next => setChildren(children.map((c, j) => j === i ? next : c))}
              onRemove={children.length > 1 ? () => setChildren(children.filter((_, j) => j !== i)) : undefined}
            />
          </li>
        ))}
      </ul>
      {kind !== 'not' && (
        <div class='row'>
          <button type='button' class='secondary' onClick={() => setChildren([...children, { ...NEW_LEAF }])}>Add condition</button>
          <button type='button' class='secondary' onClick={() => setChildren([...children, { any: [{ ...NEW_LEAF }] }])}>Add group</button>
        </div>
      )}
    </fieldset>
  )
}

function LeafRow ({ leaf, onChange, remove, label }: { leaf: Leaf, onChange: (next: Condition) => void, remove: JSX.Element | false, label: string }): JSX.Element {
  const [text, setText] = useState(formatValue(leaf.value))
  // The rule changed elsewhere (the JSON view): show its value unless the text already means it.
  useEffect(() => {
    if (JSON.stringify(parseValue(leaf.op, text)) !== JSON.stringify(leaf.value)) setText(formatValue(leaf.value))
  }, [leaf.value, leaf.op])
  const set = (patch: Partial<Leaf>): void => onChange({ ...leaf, ...patch })
  return (
    <div class='leaf' role='group' aria-label={`Condition ${label}`}>
      <label class='inline'><span class='label'>Fact</span>
        <input list='facts' aria-label={`Condition ${label}: fact`} value={leaf.fact} onInput={e => set({ fact: e.currentTarget.value })} />
      </label>
      <label class='inline'><span class='label'>Operator</span>
        <select
          aria-label={`Condition ${label}: operator`} value={leaf.op}
          onChange={e => { const op = e.currentTarget.value; set({ op, value: parseValue(op, op === 'exists' ? 'true' : text) }) }}
        >
          {OPS.map(op => <option key={op} value={op}>{op}</option>)}
        </select>
      </label>
      <label class='inline'><span class='label'>Value</span>
        {leaf.op === 'exists'
          ? <select aria-label={`Condition ${label}: value`} value={String(leaf.value)} onChange={e => set({ value: e.currentTarget.value === 'true' })}>
            <option value='true'>true</option><option value='false'>false</option>
          </select>
          : <input
              aria-label={`Condition ${label}: value`} value={text} placeholder={leaf.op === 'in' || leaf.op === 'nin' ? 'a, b, c' : ''}
              onInput={e => { setText(e.currentTarget.value); set({ value: parseValue(leaf.op, e.currentTarget.value) }) }}
            />}
      </label>
      {(leaf.fact === 'count' || leaf.fact === 'sum') && <>
        <label class='inline'><span class='label'>Event</span>
          <input aria-label={`Condition ${label}: event`} value={leaf.event ?? ''} onInput={e => set({ event: e.currentTarget.value })} />
        </label>
        {leaf.fact === 'sum' && <label class='inline'><span class='label'>Field</span>
          <input aria-label={`Condition ${label}: field`} value={leaf.field ?? ''} onInput={e => set({ field: e.currentTarget.value })} />
        </label>}
        <label class='inline'><span class='label'>Within</span>
          <input aria-label={`Condition ${label}: within`} placeholder='7d' size={5} value={leaf.within ?? ''} onInput={e => set({ within: e.currentTarget.value === '' ? undefined : e.currentTarget.value })} />
        </label>
      </>}
      {remove}
    </div>
  )
}

/** The builder and the JSON view of one optional rule (`undefined`: no condition, every triggered event). */
export function ConditionBuilder ({ rule, onChange, name }: { rule: Condition | undefined, onChange: (next: Condition | undefined) => void, name: string }): JSX.Element {
  const [text, setText] = useState(JSON.stringify(rule ?? null, null, 2))
  const [problem, setProblem] = useState<string | null>(null)
  useEffect(() => {
    let same = false
    try { same = JSON.stringify(JSON.parse(text)) === JSON.stringify(rule ?? null) } catch { same = false }
    if (!same) { setText(JSON.stringify(rule ?? null, null, 2)); setProblem(null) }
  }, [rule])
  const onJson = (value: string): void => {
    setText(value)
    try {
      const parsed = JSON.parse(value) as Condition | null
      if (parsed !== null && (typeof parsed !== 'object' || Array.isArray(parsed))) throw new Error('a condition is an object, or null for none')
      setProblem(null)
      onChange(parsed ?? undefined)
    } catch (error) {
      setProblem(`Not applied: ${(error as Error).message}`)
    }
  }
  return (
    <div class='builder'>
      <datalist id='facts'>{FACTS.map(f => <option key={f} value={f} />)}</datalist>
      <div class='builder-tree'>
        {rule === undefined
          ? <p class='empty'>No condition: every event that passes the trigger matches. <button type='button' class='secondary' onClick={() => onChange({ all: [{ ...NEW_LEAF }] })}>Add a condition</button></p>
          : <Node node={rule} label={name} onChange={onChange} onRemove={() => onChange(undefined)} />}
      </div>
      <label class='field json'>
        <span class='label'>{name} as JSON</span>
        <textarea rows={10} spellcheck={false} value={text} onInput={e => onJson(e.currentTarget.value)} aria-invalid={problem !== null} />
        {problem !== null && <small class='error' role='alert'>{problem}</small>}
      </label>
    </div>
  )
}
