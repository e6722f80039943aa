#!/usr/bin/env bash
# A throwaway PostgreSQL + pgvector cluster for `npm run bench:retrieval -- --database-url ...`, made
# by the code the tests' engine matrix uses (testkit/common/postgres.ts): 127.0.0.1, a free port, a
# password for every TCP login, durable settings (fsync on), sized for 100,000-row corpora.
#
#   bench/pg-local.sh build    # scripts/install-postgres.sh: PostgreSQL 15, pgvector from ../shared/vendor
#   bench/pg-local.sh start    # initdb + start; prints the superuser's DATABASE_URL
#   bench/pg-local.sh stop     # stop the cluster and delete its directory
#
# PGBENCH_SETTINGS adds server settings to `start`, as "name=value name=value" (for example
# "shared_preload_libraries=pg_stat_statements pg_stat_statements.track=all").
set -euo pipefail
cd "$(dirname "$0")/.."
STATE="${PGBENCH_STATE:-/tmp/fgentic-pg-local}"
case "${1:-}" in
  build)
    bash scripts/install-postgres.sh
    ;;
  start)
    out="$(node --import tsx testkit/common/postgres.ts start \
      "shared_buffers=1GB maintenance_work_mem=1GB max_parallel_maintenance_workers=0 ${PGBENCH_SETTINGS:-}")"
    head -1 <<<"$out" >"$STATE"
    tail -1 <<<"$out"
    ;;
  stop)
    [ -f "$STATE" ] || { echo "no cluster recorded in $STATE" >&2; exit 1; }
    node --import tsx testkit/common/postgres.ts stop "$(cat "$STATE")"
    rm -f "$STATE"
    ;;
  *)
    echo "usage: $0 build | start | stop" >&2
    exit 2
    ;;
esac
