# shellcheck shell=bash
# bench/lib.sh: helpers shared by the benchmark scripts (bench/run.sh,
# bench/decisions.sh, bench/webhooks.sh). Sourced, never run; bash with
# `set -euo pipefail`.
#
# The caller sets its own settings (DURATION, CONNECTIONS, THREADS, WARMUP,
# BUILD, RESULTS_DIR, ...) before sourcing this file, which gives those all
# the scripts share (PERF, PERF_SECONDS, KEEP, QUIET_MAX, QUIET_BUSY,
# NOISY_CORES, NOISY_RETRIES) their defaults; then the caller calls, in
# this order:
#   bench_resolve_build     REVOPSD, REVOPSCTL, PMS_SIM, NPROC from BUILD
#   bench_require_bins / bench_require_tools
#   bench_init_workdir      W (mktemp -d), RES (W/results), the exit trap
# The exit trap stops perf and wrk, then calls the caller's
# bench_stop_servers (if defined) for the processes it started, copies RES
# to RESULTS_DIR when set, and removes W unless KEEP=1.

BENCH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH/.." && pwd)

# The settings every script takes, each given its default when unset or
# empty (each script's header says what they do).
: "${PERF:=0}" "${PERF_SECONDS:=10}" "${KEEP:=0}" "${QUIET_MAX:=60}" "${QUIET_BUSY:=0.10}" \
  "${NOISY_CORES:=0.10}" "${NOISY_RETRIES:=2}"

die() { echo "bench: $*" >&2; exit 1; }
log() { echo "bench: $*" >&2; }

bench_resolve_build() { # BUILD (relative to the repo root, or absolute) -> binaries
  case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
  # shellcheck disable=SC2034 # used by the scripts that source this file
  REVOPSD="$BUILD/revopsd" REVOPSCTL="$BUILD/revopsctl" PMS_SIM="$BUILD/pms-sim"
  NPROC=$(nproc)
}

bench_require_bins() { # bench_require_bins PATH...: built binaries
  local bin
  for bin in "$@"; do
    [ -x "$bin" ] || die "$bin missing: run 'make build' (or 'make bench') first"
  done
}

bench_require_tools() { # bench_require_tools NAME...: tools on PATH
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null || die "$tool not found: run 'scripts/install-deps.sh --bench'"
  done
}

# ---------------------------------------------------------------- processes
WRK_PID=""
PERF_PID=""

stop_pid() { # stop_pid PID [SIGNAL]: signal, wait up to 10 s, then KILL
  local pid=$1 sig=${2:-TERM} _
  [ -n "$pid" ] || return 0
  kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
  kill "-$sig" "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null || true
}

bench_cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_pid "$PERF_PID" INT
  stop_pid "$WRK_PID"
  if declare -F bench_stop_servers >/dev/null; then bench_stop_servers || true; fi
  if [ -n "${RESULTS_DIR:-}" ] && [ -d "$RES" ]; then
    { mkdir -p "$RESULTS_DIR" && cp -r "$RES"/. "$RESULTS_DIR"/; } || true
  fi
  if [ "${KEEP:-0}" = 1 ]; then log "work dir kept: $W"; else rm -rf "$W"; fi
  exit "$rc"
}

bench_init_workdir() { # W: a fresh mktemp -d work dir, removed on exit; RES inside it
  W=$(mktemp -d "${TMPDIR:-/tmp}/revops-bench.XXXXXX")
  RES="$W/results"
  mkdir -p "$RES"
  trap bench_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

json_field() { # json_field FIELD < json
  python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}

wait_http() { # wait_http URL PID WHAT: until URL answers 200 (10 s)
  local url=$1 pid=$2 what=$3 _
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || die "$what exited during start-up"
    if [ "$(curl -s -o /dev/null -w '%{http_code}' "$url" || true)" = 200 ]; then return 0; fi
    sleep 0.1
  done
  die "$what did not answer $url within 10 s"
}

wait_listening() { # wait_listening LOGFILE PID WHAT: until WHAT's JSON log has "listening" (10 s)
  local f=$1 pid=$2 what=$3 _
  for _ in $(seq 1 100); do
    grep -q '"event":"listening"' "$f" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || { cat "$f" >&2; die "$what exited during start-up"; }
    sleep 0.1
  done
  grep -q '"event":"listening"' "$f" || die "$what logged no \"listening\" event within 10 s"
}

# ---------------------------------------------------------------- nginx
# The scripts that run nginx write W/nginx.conf themselves: the main context
# from nginx_conf_main, then their own http block, whose directives include
# the lines of nginx_temp_paths; then nginx_start runs it.

# nginx_conf_main WORKER_CONNECTIONS: the main context of an nginx.conf on
# stdout: no daemon, a master and NPROC workers, the error log and pid file
# in W, WORKER_CONNECTIONS per worker; as root, "user root;" first, since
# workers would drop to nobody and could not read the 0700 work dir.
nginx_conf_main() {
  local user_line=""
  if [ "$(id -u)" -eq 0 ]; then user_line="user root;"; fi
  cat <<EOF
$user_line
daemon off;
master_process on;
worker_processes $NPROC;
error_log $W/nginx-error.log warn;
pid $W/nginx.pid;
events { worker_connections $1; }
EOF
}

# nginx_temp_paths NGINX_V: the *_temp_path directives for an http block,
# in W/nginx-tmp (the caller makes it), for the body and each of the proxy,
# fastcgi, uwsgi and scgi modules that NGINX_V (`nginx -V` output) does not
# list as left out: only modules compiled in accept theirs. One directive a
# line, the lines after the first indented by four spaces.
nginx_temp_paths() {
  local m paths="client_body_temp_path $W/nginx-tmp/body;"
  for m in proxy fastcgi uwsgi scgi; do
    case "$1" in *"--without-http_${m}_module"*) ;; *) paths+=$'\n'"    ${m}_temp_path $W/nginx-tmp/$m;" ;; esac
  done
  echo "$paths"
}

# nginx_start: check W/nginx.conf with `nginx -t` (die with its complaint
# if it fails), then run NGINX on it in the background: NGINX_PID, its
# stderr appended to W/nginx-error.log. The caller waits for it to answer.
nginx_start() {
  "$NGINX" -c "$W/nginx.conf" -p "$W" -t -q 2>"$W/nginx-test.log" \
    || { cat "$W/nginx-test.log" >&2; die "nginx rejected $W/nginx.conf"; }
  "$NGINX" -c "$W/nginx.conf" -p "$W" 2>>"$W/nginx-error.log" &
  # shellcheck disable=SC2034 # used by the scripts that source this file
  NGINX_PID=$!
}

# ---------------------------------------------------------------- machine
bench_print_machine() { # bench_print_machine TITLE: the "==", machine: and revops: lines
  local cpu_model rev
  cpu_model=$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
  echo "== $1 $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: nproc=$NPROC cpu='${cpu_model:-unknown}' kernel=$(uname -r) loadavg=$(cut -d' ' -f1-3 /proc/loadavg)"
  case "$BUILD/" in
    "$ROOT"/*) rev="$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown), " ;;
    *) rev="" ;;
  esac
  echo "revops:  $rev$REVOPSD built $(date -u -r "$REVOPSD" +%Y-%m-%dT%H:%M:%SZ)"
}

# ---------------------------------------------------------------- wrk
# WRK_SCRIPT: the Lua script run_wrk passes to wrk (-s); WRK_TIMEOUT, if
# set, wrk's --timeout (wrk's default is 2s: slower answers count as socket
# timeouts and are left out of the latency figures).

run_wrk() { # run_wrk URL SECONDS OUTFILE: wrk -tTHREADS -cCONNECTIONS --latency
  local opts=()
  [ -z "${WRK_TIMEOUT:-}" ] || opts=(--timeout "$WRK_TIMEOUT")
  wrk -t"$THREADS" -c"$CONNECTIONS" -d"$2"s --latency "${opts[@]}" -s "$WRK_SCRIPT" "$1" >"$3" 2>&1 &
  WRK_PID=$!
  wait "$WRK_PID" || { cat "$3" >&2; die "wrk failed on $1"; }
  WRK_PID=""
}

wrk_field() { # wrk_field OUTFILE: Requests/sec of a wrk output
  sed -n 's/^Requests\/sec:[[:space:]]*//p' "$1"
}

wait_quiet() { # wait until other processes leave the machine (almost) idle
  local waited=0 busy
  while :; do
    busy=$(python3 "$BENCH/cpu.py" idle 1)
    awk -v b="$busy" -v m="$QUIET_BUSY" 'BEGIN { exit !(b <= m) }' && return 0
    waited=$((waited + 1))
    if [ "$waited" -ge "$QUIET_MAX" ]; then
      log "WARNING: machine still $(awk -v b="$busy" 'BEGIN { printf "%.0f", b * 100 }')% busy" \
        "after ${QUIET_MAX}s; measuring anyway (see the other% column)"
      return 0
    fi
    [ "$waited" -eq 1 ] && log "waiting for other processes to leave the CPU (busy $busy)..."
  done
}

cpu_secs() { # cpu_secs TIMESFILE: children user+sys seconds from `times`
  awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/); print u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$1"
}

# wrk_measure URL "PID..." SECONDS OUTFILE [NAME=PID]: one wrk run, then a
# "bench-cpu:" line appended to OUTFILE with the CPU used during it, in
# cores: server (the PIDs' process trees), wrk, and everything else. With
# NAME=PID, " NAME=<cores>" is added for that one process tree (a part of
# server). Nothing but wrk may run as this shell's child meanwhile.
wrk_measure() {
  local t0 t1 m0 m1 p0="" p1="" part_name="" part_pid="" pids
  read -ra pids <<<"$2"
  if [ $# -ge 5 ]; then part_name=${5%%=*}; part_pid=${5#*=}; fi
  m0=$(python3 "$BENCH/cpu.py" snapshot "${pids[@]}")
  [ -z "$part_pid" ] || p0=$(python3 "$BENCH/cpu.py" snapshot "$part_pid")
  times >"$W/times0" # children CPU: from here on only wrk runs as our child
  t0=$(date +%s.%N)
  run_wrk "$1" "$3" "$4"
  t1=$(date +%s.%N)
  times >"$W/times1"
  m1=$(python3 "$BENCH/cpu.py" snapshot "${pids[@]}")
  [ -z "$part_pid" ] || p1=$(python3 "$BENCH/cpu.py" snapshot "$part_pid")
  # CPU used during the run, in cores: server (process tree), wrk, the rest.
  awk -v t0="$t0" -v t1="$t1" -v c0="$(cpu_secs "$W/times0")" -v c1="$(cpu_secs "$W/times1")" \
    -v m0="$m0" -v m1="$m1" -v n="$NPROC" -v pn="$part_name" -v p0="$p0" -v p1="$p1" 'BEGIN {
    split(m0, a, " "); split(m1, b, " "); wall = t1 - t0;
    total = b[1] - a[1]; server = b[2] - a[2]; wrk = c1 - c0;
    other = total - server - wrk; if (other < 0) other = 0;
    printf "bench-cpu: wall=%.2f cores=%d server=%.3f wrk=%.3f other=%.3f",
      wall, n, server / wall, wrk / wall, other / wall
    if (pn != "") { split(p0, x, " "); split(p1, y, " "); printf " %s=%.3f", pn, (y[2] - x[2]) / wall }
    printf "\n" }' >>"$4"
}

measure_once() { # measure_once URL "PID..." OUTFILE: WARMUP-second warm-up, then DURATION measured
  run_wrk "$1" "$WARMUP" "$W/warmup.txt"
  wrk_measure "$1" "$2" "$DURATION" "$3"
}

# measure_quiet WHAT OUTFILE COMMAND...: wait_quiet, then COMMAND (which
# writes OUTFILE, bench-cpu line included); again, up to NOISY_RETRIES times,
# while other processes took more than NOISY_CORES cores. The last attempt is
# kept.
measure_quiet() {
  local what=$1 out=$2 try other
  shift 2
  for try in $(seq 0 "$NOISY_RETRIES"); do
    wait_quiet
    "$@"
    other=$(sed -n 's/^bench-cpu: .* other=\([0-9.]*\).*/\1/p' "$out")
    awk -v o="$other" -v m="$NOISY_CORES" 'BEGIN { exit !(o > m) }' || break
    [ "$try" -lt "$NOISY_RETRIES" ] && log "$what: other processes took $other cores; measuring again"
  done
  return 0
}

# ---------------------------------------------------------------- perf
perf_top() { # perf_top LINES OUTFILE PERF-REPORT-ARGS...: filtered head, no SIGPIPE
  local n=$1 f=$2; shift 2
  perf report -i "$RES/perf.data" --stdio "$@" -g none >"$f.full" 2>/dev/null || true
  grep -v -e '^$' -e '^#' "$f.full" | sed -n "1,${n}p" >"$f"
  rm -f "$f.full"
  cat "$f"
}

# perf_record PID: `perf record --call-graph dwarf` of PID for PERF_SECONDS
# into RES/perf.data; the caller keeps the load running meanwhile.
perf_record() {
  perf record -F 999 --call-graph dwarf,16384 -o "$RES/perf.data" -p "$1" \
    -- sleep "$PERF_SECONDS" >"$W/perf-record.log" 2>&1 &
  PERF_PID=$!
  wait "$PERF_PID" || { cat "$W/perf-record.log" >&2; die "perf record failed"; }
  PERF_PID=""
}

perf_summary() { # the top of `perf report` for RES/perf.data: by thread, object, symbol, inclusive
  echo "-- self time by thread name"
  perf_top 12 "$RES/perf-comm.txt" --no-children --sort comm
  echo "-- self time by shared object"
  perf_top 12 "$RES/perf-dso.txt" --no-children --sort dso
  echo "-- self time by symbol (top 40)"
  perf_top 40 "$RES/perf-self.txt" --no-children --sort symbol,dso
  echo "-- inclusive time (callees included) by symbol (top 60)"
  perf_top 60 "$RES/perf-children.txt" --children --sort symbol
}
