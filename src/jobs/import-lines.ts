// The lines of an import's file from a byte offset (a resumed job starts past its last committed row):
// read in chunks, never whole, each line with the offset just past its newline. A line longer than
// `lineMaxBytes` is not kept (its text is null: the job refuses it) and costs no more memory than that.

import { createReadStream } from 'node:fs'

export interface ImportLine {
  /** The line without its newline (UTF-8), or null when it was too long. */
  text: string | null
  /** The byte offset past this line's newline (or the end of the file). */
  end: number
}

export async function * importLines (path: string, offset: number, lineMaxBytes: number): AsyncGenerator<ImportLine> {
  let parts: Buffer[] = []
  let partBytes = 0
  let tooLong = false
  let at = offset
  for await (const chunk of createReadStream(path, { start: offset, highWaterMark: 256 * 1024 }) as AsyncIterable<Buffer>) {
    let from = 0
    for (let newline = chunk.indexOf(10); newline !== -1; newline = chunk.indexOf(10, from)) {
      const piece = chunk.subarray(from, newline)
      at += newline - from + 1
      from = newline + 1
      if (tooLong || partBytes + piece.byteLength > lineMaxBytes) {
        yield { text: null, end: at }
      } else {
        const bytes = parts.length === 0 ? piece : Buffer.concat([...parts, piece])
        yield { text: bytes.toString('utf8'), end: at }
      }
      parts = []
      partBytes = 0
      tooLong = false
    }
    const rest = chunk.subarray(from)
    at += rest.byteLength
    if (tooLong) continue
    if (partBytes + rest.byteLength > lineMaxBytes) {
      tooLong = true
      parts = []
      partBytes = 0
    } else if (rest.byteLength > 0) {
      // Copied: the stream may reuse its chunk.
      parts.push(Buffer.from(rest))
      partBytes += rest.byteLength
    }
  }
  if (tooLong) yield { text: null, end: at }
  else if (partBytes > 0) yield { text: Buffer.concat(parts).toString('utf8'), end: at }
}
