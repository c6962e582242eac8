#!/usr/bin/env bash
# npm test's checks before the tests: type check, lint and build, at once (each is one busy core at a
# time, and they read the sources only; the build writes dist/, which neither of the others reads).
# Each one's output is printed when it ends, in one piece; exits 1 if any failed, naming which.
set -uo pipefail
cd "$(dirname "$0")/.."

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
pids=()
names=(typecheck lint build)
for name in "${names[@]}"; do
  npm run --silent "$name" >"$out/$name" 2>&1 &
  pids+=($!)
done
failed=()
for i in "${!names[@]}"; do
  if ! wait "${pids[$i]}"; then failed+=("${names[$i]}"); fi
  cat "$out/${names[$i]}"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed: ${failed[*]}" >&2
  exit 1
fi
