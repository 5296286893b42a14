#!/usr/bin/env bash
# Runs a command with TEST_DATABASE_URL pointing at a reachable PostgreSQL server:
#   1. TEST_DATABASE_URL (or DATABASE_URL) when set and reachable;
#   2. else the local server on 127.0.0.1:5432 when reachable;
#   3. else a private throw-away cluster started for this command and stopped afterwards.
# LOOPX_TEST_PRIVATE_PG=1 skips 1 and 2: always a private cluster (scripts/test-loaded.sh runs
# two suites side by side, each on its own cluster, as on a machine with nothing on 5432).
# Installs Debian's postgresql package first when the machine has no server binaries.
# Usage: scripts/with-postgres.sh go test ./...
#        scripts/with-postgres.sh --install-only   (only make sure the binaries are there)
set -euo pipefail

find_bindir() {
  if command -v initdb >/dev/null 2>&1 && command -v postgres >/dev/null 2>&1; then
    dirname "$(command -v initdb)"; return 0
  fi
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -V -r); do
    if [[ -x "$d/initdb" && -x "$d/postgres" ]]; then echo "$d"; return 0; fi
  done
  return 1
}

reachable() { # url
  [[ -n "$1" ]] || return 1
  if command -v pg_isready >/dev/null 2>&1; then
    timeout 5 pg_isready -q -d "$1" >/dev/null 2>&1
  else
    timeout 5 psql "$1" -Atqc 'select 1' >/dev/null 2>&1
  fi
}

if ! bindir=$(find_bindir); then
  echo "with-postgres: no PostgreSQL server binaries; installing Debian's postgresql" >&2
  if [[ $(id -u) -eq 0 ]]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null
  bindir=$(find_bindir) || { echo "with-postgres: postgresql installed but no initdb found" >&2; exit 1; }
fi
export PATH="$bindir:$PATH"
if [[ "${1:-}" == "--install-only" ]]; then exit 0; fi

if [[ "${LOOPX_TEST_PRIVATE_PG:-}" == 1 ]]; then
  echo "with-postgres: LOOPX_TEST_PRIVATE_PG=1; starting a private cluster" >&2
else
  for url in "${TEST_DATABASE_URL:-}" "${DATABASE_URL:-}"; do
    if reachable "$url"; then
      export TEST_DATABASE_URL="$url"
      exec "$@"
    fi
  done
  local_url="postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
  if reachable "$local_url"; then
    export TEST_DATABASE_URL="$local_url"
    exec "$@"
  fi
  echo "with-postgres: no reachable server; starting a private cluster" >&2
fi
base=$(mktemp -d /tmp/loopx-pg.XXXXXX)
chmod 755 "$base"
data="$base/data"
as_pg=()
if [[ $(id -u) -eq 0 ]]; then
  chown postgres: "$base"
  as_pg=(runuser -u postgres --)
fi
"${as_pg[@]}" "$bindir/initdb" -D "$data" -U postgres -A trust -E UTF8 --locale=C --no-sync >"$base/initdb.log" 2>&1 \
  || { cat "$base/initdb.log" >&2; exit 1; }
# Throw-away test cluster: durability off, more connections for parallel test packages. A
# free port is picked at random; another cluster starting at the same moment (two suites at
# once) may take it first, so a start that fails is tried again on another port.
cleanup() {
  "${as_pg[@]}" "$bindir/pg_ctl" -D "$data" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$base"
}
trap cleanup EXIT INT TERM
started=""
for _ in 1 2 3 4 5; do
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null \
    || echo $((20000 + RANDOM % 30000)))
  if "${as_pg[@]}" "$bindir/pg_ctl" -D "$data" -l "$base/postgres.log" -w -t 120 \
    -o "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories= -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" \
    start >/dev/null; then
    started=1
    break
  fi
  "${as_pg[@]}" "$bindir/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
done
[[ -n "$started" ]] || { cat "$base/postgres.log" >&2; exit 1; }
export TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
"$@"
