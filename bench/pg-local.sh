#!/usr/bin/env bash
# Throwaway PostgreSQL + pgvector for `npm run bench:retrieval -- --database-url ...` (never used by
# CI or tests). Builds pgvector from a source checkout into the local PostgreSQL, starts a cluster
# under a temporary directory on 127.0.0.1 and a random free port, and prints the database URL.
#
#   bench/pg-local.sh build PGVECTOR_SRC   # make + make install (needs postgresql-server-dev-NN, build-essential)
#   bench/pg-local.sh start                # initdb + start; prints DATABASE_URL; state in $PGBENCH_DIR
#   bench/pg-local.sh stop                 # stop the cluster and delete its directory
#
# PG_MAJOR (default: newest under /usr/lib/postgresql) and PGBENCH_DIR (default /tmp/pgbench) select
# the server and the state directory; PGBENCH_SERVER_OPTIONS adds server options to `start` (for
# example `-c shared_preload_libraries=pg_stat_statements`).
set -euo pipefail
PG_MAJOR="${PG_MAJOR:-$(ls /usr/lib/postgresql | sort -n | tail -1)}"
BIN="/usr/lib/postgresql/${PG_MAJOR}/bin"
DIR="${PGBENCH_DIR:-/tmp/pgbench}"
# initdb and postgres refuse to run as root; use the packaged service account when we are root.
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

case "${1:-}" in
  build)
    src="${2:?pgvector source directory}"
    # OPTFLAGS="" matches distribution packages (no -march=native), so numbers transfer to them.
    make -C "$src" PG_CONFIG="$BIN/pg_config" OPTFLAGS="" -j"$(nproc)"
    make -C "$src" PG_CONFIG="$BIN/pg_config" install
    ;;
  start)
    mkdir -p "$DIR"
    [ "$(id -u)" = 0 ] && chown postgres "$DIR"
    as_pg "$BIN/initdb" -D "$DIR/data" -U postgres --auth=trust -E UTF8 >/dev/null
    port=$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")
    as_pg "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w start \
      -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$DIR -c shared_buffers=1GB -c maintenance_work_mem=1GB -c max_parallel_maintenance_workers=0 ${PGBENCH_SERVER_OPTIONS:-}" >/dev/null
    echo "$port" >"$DIR/port"
    echo "postgres://postgres@127.0.0.1:$port/postgres"
    ;;
  stop)
    as_pg "$BIN/pg_ctl" -D "$DIR/data" -m fast stop >/dev/null || true
    rm -rf "$DIR"
    ;;
  *)
    echo "usage: $0 build PGVECTOR_SRC | start | stop" >&2
    exit 2
    ;;
esac
