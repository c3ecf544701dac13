#!/usr/bin/env bash
# revops benchmark: authenticated GET /v2/portfolios/{id}/properties on
# revopsd against nginx serving the same body as a static file.
#
#   make bench            (installs wrk + nginx, builds, then runs this)
#   bench/run.sh          (from the repo root, after `make build`)
#
# Everything runs on 127.0.0.1 on free ports, in a mktemp -d work dir that
# is removed at the end; every process started here is stopped on exit.
#
# Per run (RUNS rounds, alternating targets, same wrk settings for each):
#   revopsd, access log (stderr) -> file in the work dir   (as deployed)
#   nginx, static copy of the same response body
#   revopsd, stderr -> /dev/null                           (no access log)
# Each measurement is preceded by a WARMUP-second wrk run that is discarded.
#
# Environment:
#   DURATION     seconds per measurement (20)
#   CONNECTIONS  wrk connections (64)
#   RUNS         rounds (3)
#   THREADS      wrk threads (2); revopsd threads and nginx workers = nproc
#   WARMUP       warm-up seconds before each measurement (3)
#   BUILD        build directory holding revopsd/revopsctl (build; relative
#                to the repo root, or absolute)
#   RESULTS_DIR  if set, wrk outputs and summary.json are copied there
#   PERF         if 1, after the rounds profile revopsd (access log on) with
#                `perf record --call-graph dwarf` for PERF_SECONDS (10) under
#                the same load and print the top of `perf report` (needs
#                perf); RUNS=0 PERF=1 profiles only; perf.data is kept with
#                the results when RESULTS_DIR is set
#   KEEP         if 1, keep the work dir
#   QUIET_MAX    before each measurement wait up to this many seconds (60)
#                for the machine to be at most QUIET_BUSY (0.10) busy, so
#                other jobs on a shared box do not skew the figures; the CPU
#                share of server, wrk and "other" is recorded for every run
#   NOISY_RETRIES  measure again, up to this many times (2), when other
#                processes took more than NOISY_CORES (0.10) cores during a
#                measurement; the last attempt is kept (and flagged)
#
# Exit status: 0 when the measurement ran (targets met or MISSED are printed),
# non-zero when it could not run or revopsd answered anything but a 200.
set -euo pipefail

DURATION=${DURATION:-20}
CONNECTIONS=${CONNECTIONS:-64}
RUNS=${RUNS:-3}
THREADS=${THREADS:-2}
WARMUP=${WARMUP:-3}
BUILD=${BUILD:-build}
PERF=${PERF:-0}
PERF_SECONDS=${PERF_SECONDS:-10}
KEEP=${KEEP:-0}
QUIET_MAX=${QUIET_MAX:-60}
QUIET_BUSY=${QUIET_BUSY:-0.10}
NOISY_CORES=${NOISY_CORES:-0.10}
NOISY_RETRIES=${NOISY_RETRIES:-2}

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH="$ROOT/bench"
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
REVOPSD="$BUILD/revopsd"
REVOPSCTL="$BUILD/revopsctl"
NPROC=$(nproc)

die() { echo "bench: $*" >&2; exit 1; }
log() { echo "bench: $*" >&2; }

for bin in "$REVOPSD" "$REVOPSCTL"; do
  [ -x "$bin" ] || die "$bin missing: run 'make build' (or 'make bench') first"
done
for tool in wrk nginx curl python3; do
  command -v "$tool" >/dev/null || die "$tool not found: run 'scripts/install-deps.sh --bench'"
done
NGINX=$(command -v nginx)

W=$(mktemp -d "${TMPDIR:-/tmp}/revops-bench.XXXXXX")
RES="$W/results"
mkdir -p "$RES" "$W/www" "$W/nginx-tmp"

REVOPSD_PID=""
NGINX_PID=""
WRK_PID=""
PERF_PID=""

stop_pid() { # stop_pid PID [SIGNAL]: signal, wait up to 10 s, then KILL
  local pid=$1 sig=${2:-TERM} i
  [ -n "$pid" ] || return 0
  kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
  kill "-$sig" "$pid" 2>/dev/null || true
  for i in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null || true
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_pid "$PERF_PID" INT
  stop_pid "$WRK_PID"
  stop_pid "$REVOPSD_PID"
  stop_pid "$NGINX_PID" QUIT
  if [ -n "${RESULTS_DIR:-}" ] && [ -d "$RES" ]; then
    mkdir -p "$RESULTS_DIR" && cp -r "$RES"/. "$RESULTS_DIR"/ || true
  fi
  if [ "$KEEP" = 1 ]; then log "work dir kept: $W"; else rm -rf "$W"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

json_field() { # json_field FIELD < json
  python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}

wait_http() { # wait_http URL PID WHAT: until URL answers 200 (10 s)
  local url=$1 pid=$2 what=$3 i
  for i in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || die "$what exited during start-up"
    if [ "$(curl -s -o /dev/null -w '%{http_code}' "$url" || true)" = 200 ]; then return 0; fi
    sleep 0.1
  done
  die "$what did not answer $url within 10 s"
}

# ---------------------------------------------------------------- machine
CPU_MODEL=$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
echo "== revops bench $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "machine: nproc=$NPROC cpu='${CPU_MODEL:-unknown}' kernel=$(uname -r) loadavg=$(cut -d' ' -f1-3 /proc/loadavg)"
case "$BUILD/" in
  "$ROOT"/*) REV="$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown), " ;;
  *) REV="" ;;
esac
echo "revops:  $REV$REVOPSD built $(date -u -r "$REVOPSD" +%Y-%m-%dT%H:%M:%SZ)"
echo "tools:   $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2); $("$NGINX" -v 2>&1)"
echo "wrk:     -t$THREADS -c$CONNECTIONS -d${DURATION}s --latency (warm-up ${WARMUP}s each), runs=$RUNS"
echo "server:  revopsd --threads $NPROC; nginx worker_processes $NPROC; wrk shares the same $NPROC cores"
echo

# ---------------------------------------------------------------- data
CTL=("$REVOPSCTL" --data-dir "$W")
PF_ID=$("${CTL[@]}" portfolio create --name Bench --plan enterprise 2>>"$W/revopsctl.log" | json_field id)
for i in 1 2 3 4 5; do
  "${CTL[@]}" property add --portfolio "$PF_ID" --name "Bench Hotel $i" --brand BenchBrand \
    --code "BH$i" --billing-id "BILL-$i" --timezone Europe/Warsaw --currency PLN \
    >/dev/null 2>>"$W/revopsctl.log"
done
"${CTL[@]}" client create --portfolio "$PF_ID" --name bench >"$W/client.json" 2>>"$W/revopsctl.log"
CLIENT_ID=$(json_field client_id <"$W/client.json")
CLIENT_SECRET=$(json_field client_secret <"$W/client.json")
"${CTL[@]}" portfolio set-rate-limit --portfolio "$PF_ID" --per-minute 100000000 \
  >/dev/null 2>>"$W/revopsctl.log"
URL_PATH="/v2/portfolios/$PF_ID/properties"
log "portfolio $PF_ID with 5 properties, client $CLIENT_ID, rate limit lifted"

# ---------------------------------------------------------------- revopsd
REVOPSD_PORT=$(free_port)
REVOPSD_URL="http://127.0.0.1:$REVOPSD_PORT"
BENCH_TOKEN=""

start_revopsd() { # start_revopsd log|nolog
  local mode=$1 errf i
  if [ "$mode" = log ]; then errf="$W/revopsd-access.log"; else errf=/dev/null; fi
  "$REVOPSD" --listen "127.0.0.1:$REVOPSD_PORT" --data-dir "$W" --log-format json \
    --threads "$NPROC" 2>"$errf" >"$W/revopsd-stdout.log" &
  REVOPSD_PID=$!
  if [ "$mode" = log ]; then
    for i in $(seq 1 100); do
      grep -q '"event":"listening"' "$errf" 2>/dev/null && break
      kill -0 "$REVOPSD_PID" 2>/dev/null || { cat "$errf" >&2; die "revopsd exited during start-up"; }
      sleep 0.1
    done
    grep -q '"event":"listening"' "$errf" || die "revopsd logged no \"listening\" event within 10 s"
  fi
  wait_http "$REVOPSD_URL/healthz" "$REVOPSD_PID" revopsd
  BENCH_TOKEN=$(curl -sf -u "$CLIENT_ID:$CLIENT_SECRET" -d grant_type=client_credentials \
    "$REVOPSD_URL/oauth/token" | json_field access_token) || die "could not get a token"
  export BENCH_TOKEN BENCH_PORTFOLIO="$PF_ID"
}

stop_revopsd() {
  stop_pid "$REVOPSD_PID"
  REVOPSD_PID=""
  rm -f "$W/revopsd-access.log" # can be hundreds of MB per run
}

get_body() { # get_body URL FILE: one authenticated GET, must be a 200
  local code
  code=$(curl -s -o "$2" -w '%{http_code}' -H "Authorization: Bearer $BENCH_TOKEN" \
    -H "X-Service-Portfolio: $PF_ID" -H 'Accept: application/json' "$1") || true
  [ "$code" = 200 ] || { cat "$2" >&2 2>/dev/null || true; die "GET $1 answered $code, not 200"; }
}

# Save the body revopsd answers, as the file nginx will serve at the same path.
start_revopsd log
mkdir -p "$W/www$(dirname "$URL_PATH")"
get_body "$REVOPSD_URL$URL_PATH" "$W/www$URL_PATH"
python3 - "$W/www$URL_PATH" <<'EOF' || die "revopsd body is not the 5-property list"
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d["data"]) == 5, len(d["data"])
EOF
BODY_BYTES=$(wc -c <"$W/www$URL_PATH")
stop_revopsd
log "response body: $BODY_BYTES bytes, saved for nginx"

# ---------------------------------------------------------------- nginx
NGINX_PORT=$(free_port)
NGINX_URL="http://127.0.0.1:$NGINX_PORT"
NGX_V=$("$NGINX" -V 2>&1)
temp_paths="client_body_temp_path $W/nginx-tmp/body;"
for m in proxy fastcgi uwsgi scgi; do # only modules compiled in accept these
  case "$NGX_V" in *"--without-http_${m}_module"*) ;; *) temp_paths+=$'\n'"    ${m}_temp_path $W/nginx-tmp/$m;" ;; esac
done
# As root, workers would drop to nobody and could not read the 0700 work dir.
user_line=""; [ "$(id -u)" -eq 0 ] && user_line="user root;"
cat >"$W/nginx.conf" <<EOF
$user_line
daemon off;
master_process on;
worker_processes $NPROC;
error_log $W/nginx-error.log warn;
pid $W/nginx.pid;
events { worker_connections 1024; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 65;
    keepalive_requests 100000;
    server_tokens off;
    types { }
    default_type application/json;
    $temp_paths
    server {
        listen 127.0.0.1:$NGINX_PORT;
        root $W/www;
        location / { try_files \$uri =404; }
    }
}
EOF
"$NGINX" -c "$W/nginx.conf" -p "$W" -t -q 2>"$W/nginx-test.log" \
  || { cat "$W/nginx-test.log" >&2; die "nginx rejected $W/nginx.conf"; }
"$NGINX" -c "$W/nginx.conf" -p "$W" 2>>"$W/nginx-error.log" &
NGINX_PID=$!
wait_http "$NGINX_URL$URL_PATH" "$NGINX_PID" nginx
BENCH_TOKEN=${BENCH_TOKEN:-x}
get_body "$NGINX_URL$URL_PATH" "$W/nginx-body"
[ "$(wc -c <"$W/nginx-body")" = "$BODY_BYTES" ] || die "nginx body size differs from revopsd's"
log "nginx serving the same $BODY_BYTES-byte body on $NGINX_URL$URL_PATH"

# ---------------------------------------------------------------- wrk
run_wrk() { # run_wrk URL SECONDS OUTFILE
  wrk -t"$THREADS" -c"$CONNECTIONS" -d"$2"s --latency -s "$BENCH/auth.lua" "$1" >"$3" 2>&1 &
  WRK_PID=$!
  wait "$WRK_PID" || { cat "$3" >&2; die "wrk failed on $1"; }
  WRK_PID=""
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

measure_once() { # measure_once URL PID OUTFILE: warm-up, measure, CPU shares
  local t0 t1 m0 m1
  run_wrk "$1$URL_PATH" "$WARMUP" "$W/warmup.txt"
  m0=$(python3 "$BENCH/cpu.py" snapshot "$2")
  times >"$W/times0" # children CPU: from here on only wrk runs as our child
  t0=$(date +%s.%N)
  run_wrk "$1$URL_PATH" "$DURATION" "$3"
  t1=$(date +%s.%N)
  times >"$W/times1"
  m1=$(python3 "$BENCH/cpu.py" snapshot "$2")
  # CPU used during the run, in cores: server (process tree), wrk, the rest.
  awk -v t0="$t0" -v t1="$t1" -v c0="$(cpu_secs "$W/times0")" -v c1="$(cpu_secs "$W/times1")" \
    -v m0="$m0" -v m1="$m1" -v n="$NPROC" 'BEGIN {
    split(m0, a, " "); split(m1, b, " "); wall = t1 - t0;
    total = b[1] - a[1]; server = b[2] - a[2]; wrk = c1 - c0;
    other = total - server - wrk; if (other < 0) other = 0;
    printf "bench-cpu: wall=%.2f cores=%d server=%.3f wrk=%.3f other=%.3f\n",
      wall, n, server / wall, wrk / wall, other / wall }' >>"$3"
}

measure() { # measure TARGET URL ROUND
  local out="$RES/r$3-$1.txt" pid try other
  if [ "$1" = nginx ]; then pid=$NGINX_PID; else pid=$REVOPSD_PID; fi
  for try in $(seq 0 "$NOISY_RETRIES"); do
    wait_quiet
    measure_once "$2" "$pid" "$out"
    other=$(sed -n 's/^bench-cpu: .* other=//p' "$out")
    awk -v o="$other" -v m="$NOISY_CORES" 'BEGIN { exit !(o > m) }' || break
    [ "$try" -lt "$NOISY_RETRIES" ] && log "run $3 $1: other processes took $other cores; measuring again"
  done
  python3 "$BENCH/wrk_report.py" check "$out" || {
    [ "$1" = nginx ] || { cat "$out" >&2; die "$1: not every answer was a 200 (see above)"; }
  }
  printf 'bench: run %s %-14s %s req/s  %s\n' "$3" "$1" \
    "$(sed -n 's/^Requests\/sec:[[:space:]]*//p' "$out")" "$(sed -n 's/^bench-cpu: //p' "$out")" >&2
}

for round in $(seq 1 "$RUNS"); do
  start_revopsd log
  measure revopsd_log "$REVOPSD_URL" "$round"
  stop_revopsd
  measure nginx "$NGINX_URL" "$round"
  start_revopsd nolog
  measure revopsd_nolog "$REVOPSD_URL" "$round"
  stop_revopsd
done

if [ "$RUNS" -gt 0 ]; then
  echo
  python3 "$BENCH/wrk_report.py" summary "$RES"
fi

# ---------------------------------------------------------------- profile
if [ "$PERF" = 1 ]; then
  command -v perf >/dev/null || die "PERF=1 but perf is not installed"
  echo
  echo "== perf profile of revopsd (access log -> file), ${PERF_SECONDS}s under the same load"
  start_revopsd log
  wrk -t"$THREADS" -c"$CONNECTIONS" -d"$((PERF_SECONDS + WARMUP + 2))"s -s "$BENCH/auth.lua" \
    "$REVOPSD_URL$URL_PATH" >"$W/perf-wrk.txt" 2>&1 &
  WRK_PID=$!
  sleep "$WARMUP"
  perf record -F 999 --call-graph dwarf,16384 -o "$RES/perf.data" -p "$REVOPSD_PID" \
    -- sleep "$PERF_SECONDS" >"$W/perf-record.log" 2>&1 &
  PERF_PID=$!
  wait "$PERF_PID" || { cat "$W/perf-record.log" >&2; die "perf record failed"; }
  PERF_PID=""
  wait "$WRK_PID" || true
  WRK_PID=""
  perf_top() { # perf_top LINES OUTFILE PERF-REPORT-ARGS...: filtered head, no SIGPIPE
    local n=$1 f=$2; shift 2
    perf report -i "$RES/perf.data" --stdio "$@" -g none >"$f.full" 2>/dev/null || true
    grep -v -e '^$' -e '^#' "$f.full" | sed -n "1,${n}p" >"$f"
    rm -f "$f.full"
    cat "$f"
  }
  echo "-- self time by shared object"
  perf_top 12 "$RES/perf-dso.txt" --no-children --sort dso
  echo "-- self time by symbol (top 40)"
  perf_top 40 "$RES/perf-self.txt" --no-children --sort symbol,dso
  echo "-- inclusive time (callees included) by symbol (top 60)"
  perf_top 60 "$RES/perf-children.txt" --children --sort symbol
  stop_revopsd
fi
