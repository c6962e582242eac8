#!/usr/bin/env bash
# npm test: the build, then every test file (mocha, two workers) with the type check and the lint
# running beside them at the lowest priority. The tests need the build (Beacon processes run dist/); the
# two checks read the sources only, and the tests leave the cores idle a third of the time (waits on
# leases, timers, child processes): the checks take that idle time instead of a minute and a half of
# their own before the tests, and never slow a test that is computing (`nice -n 19`).
# A check's output is printed when it ends, in one piece; a failed check stops the tests (exit 1, naming
# it); otherwise the exit code is mocha's. Arguments go to mocha.
set -uo pipefail
set -m   # each background job its own process group, so that stopping one stops all it started
cd "$(dirname "$0")/.."

npm run --silent build || { echo "failed: build" >&2; exit 1; }

out="$(mktemp -d)"
checks=(typecheck lint)
pids=()
for name in "${checks[@]}"; do
  nice -n 19 npm run --silent "$name" >"$out/$name" 2>&1 &
  pids+=($!)
done
# Two workers: a third ran the suite in 9.5 min but made lease- and startup-bound files fail one run in
# three on the 2-core machine (docs/internals/test-suite.md, 2026-11-28).
node_modules/.bin/mocha --parallel --jobs 2 "$@" &
tests=$!
stop () {
  for pid in "${pids[@]}"; do kill -- "-$pid" 2>/dev/null; done
  # mocha and its workers stop on SIGINT; whatever a test started and left (a cluster node stopping
  # while the test's NATS servers are gone) is killed with the group 5 s later.
  if kill -INT -- "-$tests" 2>/dev/null; then
    for _ in 1 2 3 4 5; do kill -0 -- "-$tests" 2>/dev/null || break; sleep 1; done
    kill -KILL -- "-$tests" 2>/dev/null
  fi
  rm -rf "$out"
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for i in "${!checks[@]}"; do
  failed=0
  wait "${pids[$i]}" || failed=1
  cat "$out/${checks[$i]}"
  if [ $failed = 1 ]; then
    echo "failed: ${checks[$i]} (the tests were stopped)" >&2
    exit 1
  fi
done
wait $tests
