// The campaign's content as a visitor's page would show it: drawn by the browser SDK's own renderer
// (src/sdk/render.ts, the code that fills `[data-beacon-slot]` elements) into a slot on a mock page,
// again at every change. With variants, each variant's content can be previewed.

import type { JSX } from 'preact'
import { useEffect, useRef, useState } from 'preact/hooks'
import { renderSlots } from '../../sdk/render'
import type { Campaign } from './campaign'

interface SlotFields { slot?: unknown, title?: unknown, text?: unknown, image?: unknown, href?: unknown }

const PREVIEW_SLOT = 'panel-preview'

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

export function Preview ({ campaign }: { campaign: Campaign }): JSX.Element {
  const [variant, setVariant] = useState('')
  const slot = useRef<HTMLDivElement>(null)
  const variants = campaign.variants ?? []
  const chosen = variants.find(v => v.id === variant)
  const content: unknown = chosen?.content !== undefined ? chosen.content : campaign.content
  const fields: SlotFields = isObject(content) ? content : {}
  const renderable = ['title', 'text', 'image'].some(key => typeof fields[key as keyof SlotFields] === 'string')
  useEffect(() => {
    const element = slot.current
    if (element === null) return
    element.replaceChildren()
    delete element.dataset.beaconCampaign
    if (!renderable) return
    // The SDK fills the slot its content names; here the one slot of the preview.
    renderSlots([{ id: 'preview', name: campaign.name, priority: campaign.priority, content: { ...fields, slot: PREVIEW_SLOT } }])
  }, [JSON.stringify(content), renderable])
  return (
    <section class='preview' aria-labelledby='preview-title'>
      <h3 id='preview-title'>Preview</h3>
      <p class='hint'>
        As the SDK renders it into <code>{`<div data-beacon-slot="${typeof fields.slot === 'string' ? fields.slot : '…'}">`}</code>: its <code>title</code>, <code>text</code>,
        <code> image</code> and <code>href</code> fields; a page's own code can render any other field.
      </p>
      {variants.length > 0 && (
        <label class='inline'>Variant
          <select value={variant} onChange={e => setVariant(e.currentTarget.value)}>
            <option value=''>the campaign's content</option>
            {variants.map(v => <option key={v.id} value={v.id}>{v.id}{v.content === undefined ? ' (the campaign\'s content)' : ''}</option>)}
          </select>
        </label>
      )}
      <div class='mock-page'>
        <div class='mock-bar' aria-hidden='true'><span /><span /><span /></div>
        <div ref={slot} data-beacon-slot={PREVIEW_SLOT} data-testid='preview' class='slot' />
        {!renderable && <p class='empty'>Nothing for the SDK to render: the content has no title, text or image.</p>}
        {typeof fields.slot !== 'string' && renderable && <p class='hint'>No <code>slot</code> in the content: the SDK renders it into no element until it names one.</p>}
      </div>
    </section>
  )
}
