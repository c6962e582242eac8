// Optional rendering of campaign content into `[data-beacon-slot="name"]` elements: the first campaign
// whose content.slot is that name, built as DOM nodes from plain fields (never HTML from the server,
// so campaign content cannot inject script into the host page).

import type { Campaign } from './types.js'

interface SlotContent {
  slot?: string
  title?: string
  text?: string
  image?: string
  href?: string
}

/** Renders into the page's slots; answers the ids of the campaigns rendered now (not those already shown). */
export function renderSlots (campaigns: readonly Campaign[]): string[] {
  const rendered: string[] = []
  document.querySelectorAll<HTMLElement>('[data-beacon-slot]').forEach(slot => {
    const campaign = campaigns.find(c => (c.content as SlotContent | null)?.slot === slot.dataset.beaconSlot)
    if (campaign === undefined || slot.dataset.beaconCampaign === campaign.id) return
    const content = campaign.content as SlotContent
    const root = document.createElement(safeHref(content.href) === null ? 'div' : 'a')
    if (root instanceof HTMLAnchorElement) root.href = safeHref(content.href)!
    if (typeof content.image === 'string') root.append(Object.assign(document.createElement('img'), { src: content.image, alt: content.title ?? '' }))
    if (typeof content.title === 'string') root.append(Object.assign(document.createElement('strong'), { textContent: content.title }))
    if (typeof content.text === 'string') root.append(Object.assign(document.createElement('p'), { textContent: content.text }))
    slot.replaceChildren(root)
    slot.dataset.beaconCampaign = campaign.id
    rendered.push(campaign.id)
  })
  return rendered
}

/** Only http(s) links (and relative ones): a javascript: URL would run in the host page. */
function safeHref (href: unknown): string | null {
  try {
    const url = new URL(href as string, location.href)
    return typeof href === 'string' && (url.protocol === 'https:' || url.protocol === 'http:') ? url.href : null
  } catch {
    return null
  }
}
