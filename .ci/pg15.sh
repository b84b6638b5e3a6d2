#!/usr/bin/env bash
# A second real server for the tests: Debian's PostgreSQL 15 from apt, with
# pg_partman (postgresql-15-partman, its background worker preloaded) and
# pgvector. Debian 12 has no postgresql-15-pgvector package, so pgvector is
# built from Debian's source package (trixie's, fetched with a private apt
# state that leaves the system's sources alone) against the server's headers
# (postgresql-server-dev-15). A distribution that has the binary package gets
# it from apt instead.
#
#   bash .ci/pg15.sh start DIR   # install what is missing, initdb DIR, start; prints the DSN
#   bash .ci/pg15.sh stop DIR
#
# The server listens only on a Unix socket in DIR (trust authentication for
# local connections: it is a throwaway test server) on port $PG15_PORT (5415).
# Run as root: initdb and the server run as the postgres user apt creates.
#
# pg_partman's background worker is loaded and runs maintenance every
# $PG15_BGW_INTERVAL (2) seconds, as postgres, in the databases
# pg_partman_bgw.dbname names, which this script leaves unset:
# tests/audit/test_partitions.py names its database (scsql_partman_bgw) there only
# while pg_partman and scsql are installed in it, and waits for the worker to
# make partitions. The worker's main process starts one worker per database
# and stops for 10 minutes when that worker has already ended by the time it
# looks ("Could not start dynamic pg_partman background process"); in a
# database without pg_partman (or a missing one) the worker ends within
# milliseconds, so a database named while empty for a whole CI run let a
# moment of scheduling delay stop maintenance during the test. Parallel
# queries take up to max_parallel_workers (8) of max_worker_processes: 16
# leaves room for pg_partman's two (it stops the same way when no slot is free).
set -euo pipefail

MAJOR=15
BIN=/usr/lib/postgresql/$MAJOR/bin
PORT="${PG15_PORT:-5415}"
BGW_INTERVAL="${PG15_BGW_INTERVAL:-2}"
SRC_SUITE="${PGVECTOR_SOURCE_SUITE:-trixie}"

log() { echo "pg15.sh: $*" >&2; }

install_server() {
  local want=()
  [ -x "$BIN/postgres" ] && [ -f "/usr/share/postgresql/$MAJOR/extension/pg_partman.control" ] \
    && [ -f "/usr/share/postgresql/$MAJOR/extension/vector.control" ] && return 0
  apt-get update -qq >/dev/null
  [ -x "$BIN/postgres" ] || want+=("postgresql-$MAJOR")
  [ -f "/usr/share/postgresql/$MAJOR/extension/pg_partman.control" ] || want+=("postgresql-$MAJOR-partman")
  if [ ! -f "/usr/share/postgresql/$MAJOR/extension/vector.control" ]; then
    if apt-cache show "postgresql-$MAJOR-pgvector" >/dev/null 2>&1; then
      want+=("postgresql-$MAJOR-pgvector")
    else
      want+=("postgresql-server-dev-$MAJOR" dpkg-dev)
    fi
  fi
  if [ ${#want[@]} -gt 0 ]; then
    log "installing ${want[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null
  fi
  [ -f "/usr/share/postgresql/$MAJOR/extension/vector.control" ] || build_pgvector
}

build_pgvector() {
  # Debian's pgvector source package, verified by apt against the suite's signed index.
  local work
  work="$(mktemp -d)"
  mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial"
  echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $SRC_SUITE main" \
    > "$work/apt/sources.list"
  local apt=(-o "Dir::Etc::SourceList=$work/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
             -o APT::Sandbox::User=root -o "Dir::State::Lists=$work/apt/lists" -o "Dir::Cache=$work/apt/cache")
  log "building pgvector from Debian $SRC_SUITE's source package against PostgreSQL $MAJOR"
  (cd "$work" && apt-get "${apt[@]}" update -qq && apt-get "${apt[@]}" source -qq --download-only pgvector >/dev/null \
     && dpkg-source -x --no-check pgvector_*.dsc src >/dev/null \
     && make -s -C src -j2 PG_CONFIG="$BIN/pg_config" >build.log 2>&1 \
     && make -s -C src install PG_CONFIG="$BIN/pg_config" >>build.log 2>&1) \
    || { log "pgvector build failed"; cat "$work/build.log" >&2 2>/dev/null; rm -rf "$work"; return 1; }
  rm -rf "$work"
}

start() {
  install_server
  mkdir -p "$1"
  local dir
  dir="$(cd "$1" && pwd)"
  chown postgres: "$dir"
  cd /  # the postgres user's programs may not be able to enter the caller's directory
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    runuser -u postgres -- "$BIN/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
    cat >> "$dir/data/postgresql.conf" <<EOF
listen_addresses = ''
unix_socket_directories = '$dir'
port = $PORT
shared_preload_libraries = 'pg_partman_bgw'
pg_partman_bgw.interval = $BGW_INTERVAL
pg_partman_bgw.role = 'postgres'
pg_partman_bgw.jobmon = off
max_worker_processes = 16
max_connections = 300
fsync = off
full_page_writes = off
EOF
  fi
  runuser -u postgres -- "$BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null
  echo "host=$dir port=$PORT user=postgres dbname=postgres"
}

stop() {
  local dir="$1"
  [ -d "$dir" ] && dir="$(cd "$dir" && pwd)" && cd /
  [ -f "$dir/data/postmaster.pid" ] && runuser -u postgres -- "$BIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
  return 0
}

case "${1:-}" in
  start) start "${2:?DIR}" ;;
  stop) stop "${2:?DIR}" ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
