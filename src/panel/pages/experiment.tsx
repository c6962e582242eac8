// Experiments in the panel: the campaign editor's variants section (JSON for variants and goals,
// fields for traffic and allocation) and the results page per campaign (variants table, comparisons,
// the daily lift of the primary goal with its interval, warnings). docs/experiments.md explains each
// number.

import type { JSX } from 'preact'
import { useState } from 'preact/hooks'
import { accountPath, call, enc } from '../api'
import { Chart } from '../chart'
import { Field, Link, Loaded, Page, Table, useLoad } from '../ui'

export interface ExperimentFields {
  variants?: Array<{ id: string, weight: number, content?: unknown, control?: boolean }>
  goals?: Array<{ event: string, metric: string, windowDays: number }>
  trafficPercent?: number
  allocation?: 'fixed' | 'bandit'
}

const EXAMPLE = { variants: [{ id: 'control', weight: 1, control: true }, { id: 'treatment', weight: 1 }], goals: [{ event: 'purchase', metric: 'conversion', windowDays: 14 }] }

/** The editor's section: variants and goals as JSON (empty: no experiment), traffic and allocation. */
export function VariantsEditor ({ value, onChange }: { value: ExperimentFields, onChange: (fields: ExperimentFields) => void }): JSX.Element {
  const initial = value.variants === undefined ? '' : JSON.stringify({ variants: value.variants, goals: value.goals }, null, 2)
  const [text, setText] = useState(initial)
  const [problem, setProblem] = useState<string | null>(null)
  const apply = (next: string): void => {
    setText(next)
    if (next.trim() === '') {
      setProblem(null)
      onChange({})
      return
    }
    try {
      const parsed = JSON.parse(next) as ExperimentFields
      setProblem(null)
      onChange({ ...value, variants: parsed.variants, goals: parsed.goals })
    } catch (error) { setProblem(`Not applied: ${(error as Error).message}`) }
  }
  return (
    <>
      <h2>Experiment</h2>
      <p class='note'>Variants and goals as JSON; empty: no experiment. Changing variants, weights, goals or traffic starts a new revision.</p>
      <Field label='Variants and goals (JSON)' hint={`For example ${JSON.stringify(EXAMPLE)}`} wide>
        <textarea rows={8} spellcheck={false} value={text} onInput={e => apply(e.currentTarget.value)} aria-invalid={problem !== null} />
      </Field>
      {problem !== null && <p class='error' role='alert'>{problem}</p>}
      <div class='grid'>
        <Field label='Traffic (%)' hint='Share of eligible visitors in the experiment; empty: 100.'>
          <input type='number' min={0} max={100} value={value.trafficPercent ?? ''} disabled={value.variants === undefined} onInput={e => onChange({ ...value, trafficPercent: e.currentTarget.value === '' ? undefined : Number(e.currentTarget.value) })} />
        </Field>
        <Field label='Allocation' hint='bandit: Thompson sampling on the primary conversion goal.'>
          <select value={value.allocation ?? 'fixed'} disabled={value.variants === undefined} onChange={e => onChange({ ...value, allocation: e.currentTarget.value as 'fixed' | 'bandit' })}>
            <option value='fixed'>fixed</option>
            <option value='bandit'>bandit</option>
          </select>
        </Field>
      </div>
    </>
  )
}

interface Interval { estimate: number, low: number, high: number }
interface Results {
  revision: number
  revisions: number[]
  baseline: string
  allocation: string
  variants: Array<{ id: string, control: boolean, weight: number | null, visitors: number, goals: Array<{ event: string, metric: string, total: number, mean: number }> }>
  comparisons: Array<{ variant: string, goal: number, event: string, metric: string, lift: null | { absolute: Interval, relative: Interval | null, pValue: number, sequential: { pValue: number }, cuped: { absolute: Interval } } }>
  sampleRatio: { pValue: number, mismatch: boolean } | null
  series: Array<{ t: string, lift: Array<Interval | null> }>
  warnings: Array<{ code: string, message: string }>
}

const percent = (x: number | undefined | null): string => x == null ? '—' : `${(x * 100).toFixed(2)} %`
const number = (x: number): string => Number.isInteger(x) ? x.toLocaleString('en-US') : x.toFixed(4)
const interval = (i: Interval | null | undefined, format: (x: number) => string): string => i == null ? '—' : `${format(i.estimate)} [${format(i.low)}, ${format(i.high)}]`

export function ExperimentResultsPage ({ id }: { id: string }): JSX.Element {
  const [revision, setRevision] = useState<number | null>(null)
  const load = useLoad(() => call<Results>('GET', accountPath(`/campaigns/${enc(id)}/results${revision === null ? '' : `?revision=${revision}`}`)), [id, revision])
  return (
    <Page title={`Results: ${id}`} actions={<Link class='button' to={`campaigns/${enc(id)}`}>Edit campaign</Link>}>
      <Loaded load={load} what='the results'>{results => (
        <>
          <p>
            Revision{' '}
            <select value={results.revision} onChange={e => setRevision(Number(e.currentTarget.value))} aria-label='Revision'>
              {results.revisions.map(r => <option key={r} value={r}>{r}</option>)}
            </select>
            {' '}· baseline <strong>{results.baseline}</strong> · allocation {results.allocation}
            {results.sampleRatio !== null && ` · sample ratio p = ${results.sampleRatio.pValue.toPrecision(3)}`}
          </p>
          {results.warnings.map(w => <p key={w.code} class='error' role='alert'>{w.message}</p>)}
          <Table
            caption='Variants' rows={results.variants} empty='No variants.'
            columns={[
              { head: 'Variant', cell: v => v.control ? `${v.id} (control)` : v.id },
              { head: 'Weight', cell: v => percent(v.weight) },
              { head: 'Visitors', cell: v => number(v.visitors) },
              ...(results.variants[0]?.goals ?? []).map((g, i) => ({
                head: `${g.event} (${g.metric})`,
                cell: (v: Results['variants'][number]) => g.metric === 'conversion' ? `${number(v.goals[i]!.total)} · ${percent(v.goals[i]!.mean)}` : `${number(v.goals[i]!.total)} · ${number(v.goals[i]!.mean)} per visitor`,
              })),
            ]}
          />
          <Table
            caption={`Against ${results.baseline}`} rows={results.comparisons} empty='Nothing to compare yet.'
            columns={[
              { head: 'Variant', cell: c => c.variant },
              { head: 'Goal', cell: c => `${c.goal === 0 ? 'primary: ' : ''}${c.event} (${c.metric})` },
              { head: 'Lift (95 %)', cell: c => interval(c.lift?.absolute, c.metric === 'conversion' ? percent : number) },
              { head: 'Relative', cell: c => interval(c.lift?.relative, percent) },
              { head: 'CUPED lift', cell: c => interval(c.lift?.cuped.absolute, c.metric === 'conversion' ? percent : number) },
              { head: 'Sequential p', cell: c => c.lift === null ? '—' : c.lift.sequential.pValue.toPrecision(3) },
              { head: 'Fixed-horizon p', cell: c => c.lift === null ? '—' : c.lift.pValue.toPrecision(3) },
            ]}
          />
          {results.series.length > 0 && (
            <Chart
              title='Primary goal: lift against the baseline and its 95 % interval, per day'
              times={results.series.map(p => Date.parse(p.t))}
              series={results.variants.flatMap((v, i) => i === results.variants.findIndex(x => x.id === results.baseline) ? [] : [
                { label: `${v.id}`, values: results.series.map(p => p.lift[i]?.estimate ?? null) },
                { label: `${v.id} low`, values: results.series.map(p => p.lift[i]?.low ?? null) },
                { label: `${v.id} high`, values: results.series.map(p => p.lift[i]?.high ?? null) },
              ])}
            />
          )}
        </>
      )}
      </Loaded>
    </Page>
  )
}
