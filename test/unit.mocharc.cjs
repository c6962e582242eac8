// `npm run test:unit`: the in-process tier. Tests that start no process (no built server, nats-server,
// chromium or nginx) and need no build: pure functions, the store on a temp LMDB folder, an in-process
// Beacon on loopback. test/helpers/unit-tier.ts makes any child process fail the test that starts it.
// A new test file joins this list when it starts no process; every file runs in `npm test` anyway.

const base = require('../.mocharc.cjs')

const UNIT = [
  'test/actors/runtime.test.ts',
  'test/actors/visitor.test.ts',
  'test/architecture/docs.test.ts',
  'test/architecture/layers.test.ts',
  'test/auth/origins-identity.test.ts',
  'test/auth/tokens.test.ts',
  'test/base/assert.test.ts',
  'test/catalog/config-rows.test.ts',
  'test/cluster/partition.test.ts',
  'test/cluster/rate-shares.test.ts',
  'test/cluster/retry.test.ts',
  'test/cluster/server-version.test.ts',
  'test/config.test.ts',
  'test/delivery/backoff.test.ts',
  'test/delivery/due-heap.test.ts',
  'test/delivery/record-ids.test.ts',
  'test/delivery/relay.test.ts',
  'test/delivery/worker.test.ts',
  'test/http/browser-access.test.ts',
  'test/http/server.test.ts',
  'test/http/static-files.test.ts',
  'test/matching/campaigns.test.ts',
  'test/matching/caps.test.ts',
  'test/matching/conditions.test.ts',
  'test/matching/glob.test.ts',
  'test/matching/property.test.ts',
  'test/matching/validation.test.ts',
  'test/ops/config.test.ts',
  'test/reports/hll.test.ts',
  'test/segments/rules.test.ts',
  'test/segments/windows.test.ts',
  'test/store/record-codec.test.ts',
  'test/store/store.test.ts',
  'test/users/gate.test.ts',
  'test/webhooks/config.test.ts',
  'test/webhooks/sender.test.ts',
  'test/webhooks/ssrf.test.ts',
  'test/webhooks/template.test.ts',
]

module.exports = {
  ...base,
  require: ['test/helpers/unit-tier.ts'],
  ...(base.spec === undefined ? {} : { spec: UNIT }),
}
