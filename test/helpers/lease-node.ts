// A cluster lease node in its own process, for tests that stop it for real (SIGSTOP) and let it go on
// (SIGCONT). Arguments: <node id> <lease ms> <partitions> <NATS URLs, comma-separated>. It prints one JSON
// line per event on stdout: {"owned":[…]} after every change of its partitions, {"lost":p,"reason":…}
// when a lease is lost. SIGTERM closes it gracefully (releases its leases).

import { openLeaseNode } from './lease-nodes.js'

const [node, leaseMsText, partitionsText, urls] = process.argv.slice(2)
if (node === undefined || leaseMsText === undefined || partitionsText === undefined || urls === undefined) {
  process.stderr.write('usage: lease-node <node> <lease ms> <partitions> <urls>\n')
  process.exit(2)
}
let last = ''
const { nc, balancer } = await openLeaseNode({
  urls: urls.split(','), id: node, leaseMs: Number(leaseMsText), partitions: Number(partitionsText),
  onAcquired: () => { setImmediate(report) },
  onLost: (partition, reason) => {
    process.stdout.write(`${JSON.stringify({ lost: partition, reason })}\n`)
    setImmediate(report)
  },
  onReleasing: () => { setImmediate(report) },
})

function report (): void {
  const owned = JSON.stringify(balancer.owned())
  if (owned === last) return
  last = owned
  process.stdout.write(`{"owned":${owned}}\n`)
}
await balancer.start()
report()
setInterval(report, 50)
process.once('SIGTERM', () => {
  void balancer.close().then(() => nc.close()).then(() => process.exit(0))
})
