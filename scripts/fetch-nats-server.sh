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

have () { [ -x "$bin" ] && "$bin" --version 2>/dev/null | grep -qx "nats-server: v$want"; }

if ! have; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/lists/partial" "$tmp/parts" "$tmp/cache/archives/partial"
  # The machine's own Debian mirror, read from its apt sources (never written into the repository).
  uri=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  if [ -z "$uri" ]; then
    uri=$(awk '$1=="deb"{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  fi
  [ -n "$uri" ] || { echo "fetch-nats-server: no Debian mirror found in the apt sources" >&2; exit 1; }
  printf 'Types: deb\nURIs: %s\nSuites: trixie\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$uri" > "$tmp/parts/trixie.sources"
  O=(-o APT::Sandbox::User=root -o Dir::Etc::sourcelist=/dev/null -o Dir::Etc::sourceparts="$tmp/parts" -o Dir::State::Lists="$tmp/lists" -o Dir::Cache="$tmp/cache")
  apt-get "${O[@]}" -qq update >&2
  (cd "$tmp" && apt-get "${O[@]}" -qq download "nats-server=$want*" >&2 || apt-get "${O[@]}" -qq download nats-server >&2)
  rm -rf "$dest"
  mkdir -p "$dest"
  dpkg-deb -x "$tmp"/nats-server_*.deb "$dest"
  if ! have; then
    echo "fetch-nats-server: wanted v$want, got: $("$bin" --version 2>&1 || echo 'no binary')" >&2
    exit 1
  fi
fi
echo "$bin"
