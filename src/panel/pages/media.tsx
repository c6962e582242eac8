import type { JSX } from 'preact'
import { useState } from 'preact/hooks'
import { accountPath, call, can, enc } from '../api'
import { CopyButton, Field, Loaded, Outcome, Page, Table, formatTime, useAction, useLoad } from '../ui'

export interface MediaItem { id: string, name: string, type: string, bytes: number, url: string, createdAt: string }

const absolute = (url: string): string => new URL(url, location.origin).href
const loadMedia = (): Promise<{ media: MediaItem[] }> => call('GET', accountPath('/media'))

export function Media (): JSX.Element {
  const load = useLoad(loadMedia, [])
  const [file, setFile] = useState<File | null>(null)
  const upload = useAction(async () => {
    if (file === null) throw new Error('Choose an image first.')
    await call('POST', accountPath(`/media?name=${enc(file.name)}`), undefined, { raw: file })
    load.reload()
    return `Uploaded ${file.name}.`
  })
  const remove = useAction(async (item: MediaItem) => {
    if (!confirm(`Delete ${item.name}? Campaigns that show it will show a broken image.`)) return
    await call('DELETE', accountPath(`/media/${enc(item.id)}`))
    load.reload()
    return `Deleted ${item.name}.`
  })
  return (
    <Page title='Media'>
      {can('editor') && (
        <form class='card' onSubmit={upload.run}>
          <Field label='Image file' hint="PNG, JPEG, GIF or WebP (checked by content), up to the server's size limit.">
            <input type='file' accept='image/png,image/jpeg,image/gif,image/webp' onChange={e => setFile(e.currentTarget.files?.[0] ?? null)} />
          </Field>
          <button type='submit' disabled={upload.busy || file === null}>Upload</button>
          <Outcome action={upload} />
        </form>
      )}
      <Outcome action={remove} />
      <Loaded load={load} what='media'>{({ media }) => (
        <Table
          caption='Media' rows={media} empty='No images yet.'
          columns={[
            { head: 'Image', cell: m => <img class='thumb' src={m.url} alt={m.name} loading='lazy' /> },
            { head: 'Name', cell: m => m.name },
            { head: 'Type', cell: m => m.type },
            { head: 'Size', cell: m => `${(m.bytes / 1024).toFixed(1)} KB` },
            { head: 'Uploaded', cell: m => formatTime(m.createdAt) },
            { head: 'URL', cell: m => <span class='row'><code class='url'>{m.url}</code><CopyButton text={absolute(m.url)} label='Copy URL' /></span> },
            { head: 'Actions', cell: m => can('editor') && <button type='button' class='danger' onClick={() => remove.run(m)} aria-label={`Delete ${m.name}`}>Delete</button> },
          ]}
        />
      )}
      </Loaded>
    </Page>
  )
}

/** Choose an uploaded image for campaign content: `onPick` gets its absolute URL. */
export function MediaPicker ({ onPick }: { onPick: (url: string) => void }): JSX.Element {
  const [open, setOpen] = useState(false)
  return (
    <div class='picker'>
      <button type='button' class='secondary' aria-expanded={open} onClick={() => setOpen(!open)}>Insert an image…</button>
      {open && <PickerList onPick={url => { onPick(url); setOpen(false) }} />}
    </div>
  )
}

function PickerList ({ onPick }: { onPick: (url: string) => void }): JSX.Element {
  const load = useLoad(loadMedia, [])
  return (
    <Loaded load={load} what='media'>{({ media }) => media.length === 0
      ? <p class='empty'>No images uploaded yet (see Media).</p>
      : <ul class='media-grid'>{media.map(m => (
        <li key={m.id}><button type='button' class='tile' onClick={() => onPick(absolute(m.url))} aria-label={`Use ${m.name}`}>
          <img src={m.url} alt='' /><span>{m.name}</span>
        </button>
        </li>
      ))}
      </ul>}
    </Loaded>
  )
}
