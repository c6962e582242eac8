// A time-series line chart on uPlot, sized to its container (and resized with it). Charts are images to
// assistive technology: each carries a label, and the pages give the same numbers in tables.

import type { JSX } from 'preact'
import { useEffect, useRef } from 'preact/hooks'
import uPlot from 'uplot'

const COLORS = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#ca8a04', '#db2777']

export interface Series { label: string, values: (number | null)[] }

export function Chart ({ title, times, series }: { title: string, times: number[], series: Series[] }): JSX.Element {
  const box = useRef<HTMLDivElement>(null)
  useEffect(() => {
    const element = box.current
    if (element === null) return
    const plot = new uPlot({
      width: Math.max(element.clientWidth, 280),
      height: 220,
      scales: { x: { time: true } },
      series: [{}, ...series.map((s, i) => ({ label: s.label, stroke: COLORS[i % COLORS.length], width: 2, points: { show: times.length < 40 } }))],
      axes: [{}, { size: 56 }],
    }, [times.map(t => t / 1000), ...series.map(s => s.values)], element)
    const observer = new ResizeObserver(() => plot.setSize({ width: Math.max(element.clientWidth, 280), height: 220 }))
    observer.observe(element)
    return () => { observer.disconnect(); plot.destroy() }
  }, [times, series])
  return (
    <figure class='chart'>
      <figcaption>{title}</figcaption>
      {series.length === 0 ? <p class='empty'>Nothing counted in this range.</p> : <div ref={box} role='img' aria-label={`${title}: ${series.map(s => s.label).join(', ')}`} />}
    </figure>
  )
}
