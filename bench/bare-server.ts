// Baseline (a) of `npm run bench:http`: the least a uWebSockets.js server can do for one of Beacon's
// requests. Any POST: read the body with onData, JSON.parse it, answer a fixed JSON body inside
// res.cork. No routing table, validation, store or actors — what Beacon adds on top is measured
// against this.
//
// With BENCH_BARE_DATA_DIR set it is the durability ceiling instead: each parsed body is also put into
// an LMDB environment in that folder (opened as Beacon's Store opens it), keyed by its visitorId, and
// the answer waits until the write is flushed (fsync), as Beacon's default durability does. No other
// work: the most any server that acknowledges a write only once it is on disk can do on this disk.
//
//   BENCH_BARE_PORT=0 node --import tsx bench/bare-server.ts   → prints {"port":N} on stdout

import { loadUws } from '../src/http/uws.js'
import { open } from 'lmdb'

const host = process.env.BENCH_BARE_HOST || '127.0.0.1'
const port = Number(process.env.BENCH_BARE_PORT || 0)
const ANSWER = JSON.stringify({ status: 200, message: 'Campaigns executed.', campaigns: [] })
const decoder = new TextDecoder()
const dataDir = process.env.BENCH_BARE_DATA_DIR
const db = dataDir ? open({ path: dataDir, noSubdir: false, separateFlushed: true }) : null

const uWS = loadUws()
const app = uWS.App()

app.post('/*', (res) => {
  let aborted = false
  res.onAborted(() => { aborted = true })
  let chunks: Buffer[] | null = null
  res.onData((chunk, isLast) => {
    // The ArrayBuffer is only valid during this callback: decode it (or copy it) now.
    let text: string
    if (isLast && chunks === null) {
      text = decoder.decode(new Uint8Array(chunk))
    } else {
      (chunks ??= []).push(Buffer.from(new Uint8Array(chunk)))
      if (!isLast) return
      text = decoder.decode(Buffer.concat(chunks))
    }
    let body: { visitorId?: unknown } | null = null
    try {
      body = JSON.parse(text)
    } catch {}
    const ok = body !== null
    const answer = (): void => {
      if (aborted) return
      res.cork(() => {
        res.writeStatus(ok ? '200 OK' : '400 Bad Request')
        res.writeHeader('Content-Type', 'application/json')
        res.end(ok ? ANSWER : '{"status":400,"message":"The body is not valid JSON."}')
      })
    }
    if (db === null || !ok) return answer()
    const write = db.put(String(body!.visitorId), body) as Promise<boolean> & { flushed: Promise<void> }
    write.then(() => write.flushed).then(answer, (err: unknown) => {
      process.stderr.write(`bare-server: write failed: ${String(err)}\n`)
      process.exit(1)
    })
  })
})

app.any('/*', (res) => {
  res.onAborted(() => {})
  res.cork(() => {
    res.writeStatus('404 Not Found')
    res.end()
  })
})

app.listen(host, port, (socket) => {
  if (socket === false) {
    process.stderr.write(`bare-server: cannot listen on ${host}:${port}\n`)
    process.exit(1)
  }
  process.stdout.write(JSON.stringify({ port: uWS.us_socket_local_port(socket) }) + '\n')
})

const stop = (): void => { void (db?.close() ?? Promise.resolve()).then(() => process.exit(0)) }
process.once('SIGTERM', stop)
process.once('SIGINT', stop)
