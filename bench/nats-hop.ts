// A forwarding hop's transport alone, for bench:cluster: NATS request/reply between two processes, as
// the forwarder sends it (src/cluster/requests.ts at the sender, a subscription callback answering with
// msg.respond at the receiver), with no Beacon work on either side.
//
//   node --import tsx bench/nats-hop.ts respond <NATS URL> <answer bytes>
//   node --import tsx bench/nats-hop.ts request <NATS URL> <in flight> <seconds> <request bytes>
//
// The responder prints "ready" once subscribed. The requester prints "start" when it starts, keeps
// <in flight> requests going for <seconds>, and prints {"roundTrips":n,"failed":n,"cpuUs":n} (a request
// unanswered within 5 s counts as failed; cpuUs: its own CPU time over those seconds).

import { connect } from '@nats-io/transport-node'
import { Requests } from '../src/cluster/requests.js'

const SUBJECT = 'bench.hop'
const [role, url, ...rest] = process.argv.slice(2)
const nc = await connect({ servers: url })

if (role === 'respond') {
  const answer = new Uint8Array(Number(rest[0]))
  nc.subscribe(SUBJECT, { callback: (error, msg) => { if (error === null) msg.respond(answer) } })
  await nc.flush()
  process.stdout.write('ready\n')
  process.once('SIGTERM', () => { void nc.close().then(() => process.exit(0)) })
} else if (role === 'request') {
  const [inFlight, seconds, bytes] = rest.map(Number) as [number, number, number]
  const requests = new Requests(nc)
  const payload = new Uint8Array(bytes)
  process.stdout.write('start\n')
  const cpuBefore = process.cpuUsage()
  const endAt = performance.now() + seconds * 1000
  let roundTrips = 0
  let failed = 0
  await Promise.all(Array.from({ length: inFlight }, async () => {
    while (performance.now() < endAt) {
      try {
        await requests.request(SUBJECT, payload, 5000)
        roundTrips++
      } catch {
        failed++
      }
    }
  }))
  const cpu = process.cpuUsage(cpuBefore)
  process.stdout.write(`${JSON.stringify({ roundTrips, failed, cpuUs: cpu.user + cpu.system })}\n`)
  requests.close()
  await nc.close()
} else {
  process.stderr.write('usage: nats-hop.ts respond <url> <answer bytes> | request <url> <in flight> <seconds> <request bytes>\n')
  process.exit(2)
}
