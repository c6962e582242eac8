#!/usr/bin/env bash
# Fetches the nats-server release Beacon is tested on (Debian 13's package, whose binary needs only
# libc6 >= 2.34 and so runs on Debian 12) into .cache/nats-server/, without touching the system's apt
# configuration or /usr/sbin/nats-server. Idempotent: does nothing when the cached binary already
# reports the wanted version. Prints the binary's path on its last line.
#
#   scripts/fetch-nats-server.sh            # fetch if needed, print the path
#   BEACON_TEST_NATS_SERVER=$(scripts/fetch-nats-server.sh | tail -1) npx mocha test/cluster/x.test.ts
set -euo pipefail

want=2.10.27
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/.cache/nats-server"
bin="$dest/usr/sbin/nats-server"
# shellcheck source=scripts/lib/trixie-apt.sh
. "$root/scripts/lib/trixie-apt.sh"

have () { [ -x "$bin" ] && "$bin" --version 2>/dev/null | grep -qx "nats-server: v$want"; }

if ! have; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # The machine's own Debian mirror, read from its apt sources (never written into the repository).
  trixie_apt_setup fetch-nats-server "$tmp"
  (cd "$tmp" && { trixie_apt download "nats-server=$want*" || trixie_apt download nats-server; })
  rm -rf "$dest"
  mkdir -p "$dest"
  dpkg-deb -x "$tmp"/nats-server_*.deb "$dest"
  if ! have; then
    echo "fetch-nats-server: wanted v$want, got: $("$bin" --version 2>&1 || echo 'no binary')" >&2
    exit 1
  fi
fi
echo "$bin"
