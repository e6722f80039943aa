#!/usr/bin/env bash
# Makes PostgreSQL 15 + pgvector 0.8.6 + PgBouncer present on a Debian machine, for the test runner's
# engine matrix (scripts/run-tests.ts). Idempotent: each step runs only when its result is missing.
# pgvector is built from the verbatim source tarball in ../shared/vendor (checked against its
# SHA-256), with OPTFLAGS="" as distribution packages build it (no -march=native).
#
#   scripts/install-postgres.sh            # as root (apt-get, make install)
set -euo pipefail
PG_MAJOR=15
BIN="/usr/lib/postgresql/${PG_MAJOR}/bin"
HERE="$(cd "$(dirname "$0")/.." && pwd)"
TARBALL="${PGVECTOR_TARBALL:-$HERE/../shared/vendor/pgvector-0.8.6.tar.gz}"
SHA256=5743dac39fdfa740533cf95e71b033bd5513b71dda194b3cf19464ccbf76f3fb

missing=()
[ -x "$BIN/initdb" ] || missing+=("postgresql-${PG_MAJOR}" "postgresql-contrib-${PG_MAJOR}")
{ [ -x "$BIN/pg_config" ] && [ -f "$("$BIN/pg_config" --pgxs)" ]; } || missing+=("postgresql-server-dev-${PG_MAJOR}")
command -v gcc >/dev/null 2>&1 && command -v make >/dev/null 2>&1 || missing+=(gcc make)
command -v pgbouncer >/dev/null 2>&1 || missing+=(pgbouncer)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-postgres: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

share="$("$BIN/pg_config" --sharedir)"
if [ ! -f "$share/extension/vector.control" ]; then
  if [ ! -f "$TARBALL" ]; then
    echo "install-postgres: $TARBALL is absent: cannot build pgvector" >&2
    exit 1
  fi
  echo "$SHA256  $TARBALL" | sha256sum -c --quiet -
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  tar xzf "$TARBALL" -C "$work"
  src="$(find "$work" -mindepth 1 -maxdepth 1 -type d | head -1)"
  started=$SECONDS
  make -s -C "$src" PG_CONFIG="$BIN/pg_config" OPTFLAGS="" -j"$(nproc)" >/dev/null
  make -s -C "$src" PG_CONFIG="$BIN/pg_config" install >/dev/null
  echo "install-postgres: built and installed pgvector from $(basename "$TARBALL") in $((SECONDS - started)) s"
fi
echo "install-postgres: $("$BIN/postgres" --version), pgvector $(sed -n "s/^default_version = '\(.*\)'/\1/p" "$share/extension/vector.control"), $(pgbouncer --version | head -1)"
