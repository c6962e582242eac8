// What an upload is, decided by its first bytes (never by its name or the Content-Type it came with):
// PNG, JPEG, GIF or WebP. Anything else (SVG, which can carry script, included) is not an image here.

export const MEDIA_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'] as const
export type MediaType = typeof MEDIA_TYPES[number]

const PNG = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]
const JPEG = [0xff, 0xd8, 0xff]

export function sniffImage (bytes: Uint8Array): MediaType | null {
  if (startsWith(bytes, PNG, 0)) return 'image/png'
  if (startsWith(bytes, JPEG, 0)) return 'image/jpeg'
  if (ascii(bytes, 0, 'GIF87a') || ascii(bytes, 0, 'GIF89a')) return 'image/gif'
  // RIFF <4-byte size> WEBP, then a VP8 / VP8L / VP8X chunk.
  if (ascii(bytes, 0, 'RIFF') && ascii(bytes, 8, 'WEBPVP8')) return 'image/webp'
  return null
}

function startsWith (bytes: Uint8Array, prefix: readonly number[], at: number): boolean {
  if (bytes.length < at + prefix.length) return false
  for (let i = 0; i < prefix.length; i++) if (bytes[at + i] !== prefix[i]) return false
  return true
}

function ascii (bytes: Uint8Array, at: number, text: string): boolean {
  if (bytes.length < at + text.length) return false
  for (let i = 0; i < text.length; i++) if (bytes[at + i] !== text.charCodeAt(i)) return false
  return true
}
