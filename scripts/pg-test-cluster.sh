#!/usr/bin/env bash
# A throw-away PostgreSQL 15 cluster on a free loopback port, for tests and
# local trials: initdb into a temporary directory with fsync off and trust
# authentication on 127.0.0.1 only, as an unprivileged user (PostgreSQL
# refuses to run as root; as root the cluster runs as `nobody`).
#
#   scripts/pg-test-cluster.sh start        prints the URL, then the directory
#   scripts/pg-test-cluster.sh stop DIR     stops the cluster and removes DIR
#   scripts/pg-test-cluster.sh run CMD...   runs CMD with REVOPS_TEST_PG_URL set
#                                           to a fresh cluster, removed after;
#                                           exits 77 (skipped) without PostgreSQL
#   scripts/pg-test-cluster.sh up FILE      starts one and writes "URL DIR" to
#                                           FILE (ctest's fixture for the
#                                           black-box suites on PostgreSQL)
#   scripts/pg-test-cluster.sh down FILE    stops the cluster FILE names
set -euo pipefail

PGBIN=${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)}

as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u nobody -- "$@"; else "$@"; fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# start: prints "URL DIR" once the server accepts connections.
# PG_DURABLE=1 (benchmarks): fsync and full-page writes on, commits not
# waited for (synchronous_commit off: the durability of SQLite's WAL with
# synchronous=NORMAL, which revopsd runs), 256 MB of shared buffers.
# PG_OPTS: more server options ("-c name=value ..."), e.g. a profiling
# extension for a benchmark.
start() {
  local dir port try durability buffers=64MB
  durability="-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
  if [ "${PG_DURABLE:-0}" = 1 ]; then
    durability="-c synchronous_commit=off"
    buffers=256MB
  fi
  [ -x "$PGBIN/initdb" ] || { echo "pg-test-cluster: no PostgreSQL server (initdb) found" >&2; return 77; }
  dir=$(mktemp -d /tmp/revops-pg-XXXXXX)
  chmod 755 "$dir"
  [ "$(id -u)" -eq 0 ] && chown nobody "$dir"
  as_owner "$PGBIN/initdb" -D "$dir/data" -U revops --auth=trust -E UTF8 --no-locale \
    --no-sync >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; rm -rf "$dir"; return 1; }
  for try in 1 2 3; do
    port=$(free_port)
    if as_owner "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start \
      -o "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories=$dir $durability -c max_connections=1000 -c shared_buffers=$buffers ${PG_OPTS:-}" \
      >/dev/null 2>&1; then
      # The settings above are what the tests and benchmarks assume: check
      # that the server took them (a line break in -o once dropped them).
      if [ "$("$PGBIN/psql" -X -qAt -h "$dir" -p "$port" -U revops -d postgres \
          -c "SHOW synchronous_commit" -c "SHOW max_connections" | tr '\n' ' ')" != "off 1000 " ]; then
        echo "pg-test-cluster: the server did not take its settings" >&2
        stop "$dir"
        return 1
      fi
      echo "postgres://revops@127.0.0.1:$port/postgres $dir"
      return 0
    fi
  done
  cat "$dir/server.log" >&2
  rm -rf "$dir"
  return 1
}

stop() {
  local dir=$1
  case "$dir" in /tmp/revops-pg-*) ;; *) echo "pg-test-cluster: not a cluster dir: $dir" >&2; return 1;; esac
  as_owner "$PGBIN/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}

case "${1:-}" in
start)
  start
  ;;
stop)
  stop "${2:?usage: $0 stop DIR}"
  ;;
run)
  shift
  set +e
  out=$(start)
  rc=$?
  set -e
  [ $rc -eq 0 ] || exit $rc
  url=${out% *}
  dir=${out##* }
  trap 'stop "$dir"' EXIT
  set +e
  REVOPS_TEST_PG_URL=$url "$@"
  rc=$?
  set -e
  exit $rc
  ;;
up)
  file=${2:?usage: $0 up FILE}
  if [ -s "$file" ]; then stop "$(cut -d' ' -f2 "$file")"; fi  # a run interrupted before down
  start >"$file.tmp"
  mv "$file.tmp" "$file"
  ;;
down)
  file=${2:?usage: $0 down FILE}
  [ -s "$file" ] && stop "$(cut -d' ' -f2 "$file")"
  rm -f "$file"
  ;;
*)
  echo "usage: $0 start | stop DIR | run CMD... | up FILE | down FILE" >&2
  exit 2
  ;;
esac
