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

# Shared helpers (work dir and exit trap, free ports, start-up waits, the
# quiet-machine wait, wrk runs with CPU accounting, perf): bench/lib.sh.
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

bench_resolve_build
bench_require_bins "$REVOPSD" "$REVOPSCTL"
bench_require_tools wrk nginx curl python3
NGINX=$(command -v nginx)

bench_init_workdir
mkdir -p "$W/www" "$W/nginx-tmp"
WRK_SCRIPT="$BENCH/auth.lua"

REVOPSD_PID=""
NGINX_PID=""

bench_stop_servers() { # called by the exit trap after perf and wrk are stopped
  stop_pid "$REVOPSD_PID"
  stop_pid "$NGINX_PID" QUIT
}

# ---------------------------------------------------------------- machine
bench_print_machine "revops bench"
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
  local mode=$1 errf
  if [ "$mode" = log ]; then errf="$W/revopsd-access.log"; else errf=/dev/null; fi
  "$REVOPSD" --listen "127.0.0.1:$REVOPSD_PORT" --data-dir "$W" --log-format json \
    --threads "$NPROC" 2>"$errf" >"$W/revopsd-stdout.log" &
  REVOPSD_PID=$!
  if [ "$mode" = log ]; then
    wait_listening "$errf" "$REVOPSD_PID" revopsd
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
temp_paths=$(nginx_temp_paths "$NGX_V")
nginx_conf_main 1024 >"$W/nginx.conf"
cat >>"$W/nginx.conf" <<EOF
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
nginx_start
wait_http "$NGINX_URL$URL_PATH" "$NGINX_PID" nginx
BENCH_TOKEN=${BENCH_TOKEN:-x}
get_body "$NGINX_URL$URL_PATH" "$W/nginx-body"
[ "$(wc -c <"$W/nginx-body")" = "$BODY_BYTES" ] || die "nginx body size differs from revopsd's"
log "nginx serving the same $BODY_BYTES-byte body on $NGINX_URL$URL_PATH"

# ---------------------------------------------------------------- wrk
measure() { # measure TARGET URL ROUND
  local out="$RES/r$3-$1.txt" pid
  if [ "$1" = nginx ]; then pid=$NGINX_PID; else pid=$REVOPSD_PID; fi
  measure_quiet "run $3 $1" "$out" measure_once "$2$URL_PATH" "$pid" "$out"
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
  perf_record "$REVOPSD_PID"
  wait "$WRK_PID" || true
  WRK_PID=""
  perf_summary
  stop_revopsd
fi
