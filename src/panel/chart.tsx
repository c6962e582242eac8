// A time-series line chart on uPlot, sized to its container (and resized with it). Charts are images to
// assistive technology: each carries a label, and the pages give the same numbers in tables. The legend
// is the page's own: each series with its colour and its total over the range (uPlot's shows a value
// only under the cursor, `--` otherwise).

import type { JSX } from 'preact'
import { useEffect, useRef } from 'preact/hooks'
import uPlot from 'uplot'

const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#ca8a04', '#db2777']

export interface Series { label: string, values: (number | null)[], color?: string }

const colorOf = (s: Series, i: number): string => s.color ?? COLORS[i % COLORS.length]!
export const totalOf = (s: Series): number => s.values.reduce<number>((sum, v) => sum + (v ?? 0), 0)

export function Chart ({ title, times, series, total = 'total' }: { title: string, times: number[], series: Series[], total?: string }): JSX.Element {
  const box = useRef<HTMLDivElement>(null)
  useEffect(() => {
    const element = box.current
    if (element === null) return
    const plot = new uPlot({
      width: Math.max(element.clientWidth, 280),
      height: 220,
      legend: { show: false },
      scales: { x: { time: true } },
      series: [{}, ...series.map((s, i) => ({ label: s.label, stroke: colorOf(s, i), width: 2, points: { show: times.length < 40 } }))],
      axes: [{}, { size: 56 }],
    }, [times.map(t => t / 1000), ...series.map(s => s.values)], element)
    const observer = new ResizeObserver(() => plot.setSize({ width: Math.max(element.clientWidth, 280), height: 220 }))
    observer.observe(element)
    return () => { observer.disconnect(); plot.destroy() }
  }, [times, series])
  return (
    <figure class='chart'>
      <figcaption>{title}</figcaption>
      {series.length === 0 ? <p class='empty'>Nothing counted in this range.</p> : <>
        <div ref={box} role='img' aria-label={`${title}: ${series.map(s => `${s.label} ${totalOf(s)}`).join(', ')}`} />
        <ul class='legend' aria-label={`${title}: ${total} per series`}>
          {series.map((s, i) => (
            <li key={s.label}><span class='swatch' style={{ background: colorOf(s, i) }} aria-hidden='true' />{s.label} <strong>{totalOf(s).toLocaleString('en-US')}</strong></li>
          ))}
        </ul>
      </>}
    </figure>
  )
}
