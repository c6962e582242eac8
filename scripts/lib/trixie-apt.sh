# Sourced by scripts/fetch-node24.sh and scripts/fetch-nats-server.sh: an apt-get that downloads Debian 13
# (trixie) packages from the machine's own Debian mirror, read from its apt sources (never written into
# the repository), into a temporary folder, without touching the system's apt configuration.
#
#   trixie_apt_setup <name> <tmp>    # <name> prefixes the error messages; <tmp> holds lists and cache
#   trixie_apt download <package>... # apt-get with that configuration (run it in the download folder)

trixie_apt_setup () {
  local name=$1 tmp=$2 uri
  mkdir -p "$tmp/lists/partial" "$tmp/parts" "$tmp/cache/archives/partial"
  uri=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  if [ -z "$uri" ]; then
    uri=$(awk '$1=="deb"{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  fi
  [ -n "$uri" ] || { echo "$name: no Debian mirror found in the apt sources" >&2; exit 1; }
  printf 'Types: deb\nURIs: %s\nSuites: trixie\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$uri" > "$tmp/parts/trixie.sources"
  TRIXIE_APT_OPTIONS=(-o APT::Sandbox::User=root -o Dir::Etc::sourcelist=/dev/null -o Dir::Etc::sourceparts="$tmp/parts" -o Dir::State::Lists="$tmp/lists" -o Dir::Cache="$tmp/cache")
  apt-get "${TRIXIE_APT_OPTIONS[@]}" -qq update >&2
}

trixie_apt () { apt-get "${TRIXIE_APT_OPTIONS[@]}" -qq "$@" >&2; }
