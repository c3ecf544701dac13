#!/usr/bin/env bash
# revops benchmark: governed rate decisions, 3-property publishes
# (POST /v2/rate-decisions) on revopsd against pms-sim on loopback, with
# pms-sim's own write rate, measured in the same run, as the reference.
#
#   bench/decisions.sh    (from the repo root, after `make build`)
#
# Everything runs on 127.0.0.1 on free ports, in a mktemp -d work dir that
# is removed at the end; every process started here is stopped on exit.
#
# Per run (RUNS rounds; in each, every CONNECTIONS value in turn):
#   reference  wrk straight at pms-sim: POST /properties/{code}/rates,
#              rotating the 3 property codes, every request with its own
#              idempotency key (bench/pms_write.lua). Every answer must be a
#              200. Its writes/s / 3 is the decisions/s pms-sim alone could
#              absorb (each decision makes 3 writes).
#   decisions  a fresh data dir (portfolio, 3 properties of one brand, a PLN
#              ceiling, an approver, a rates:write client, rate limit
#              lifted), a fresh pms-sim, revopsd --pms-url at it; one curl
#              decision as a smoke test, a WARMUP-second warm-up, then wrk at
#              POST /v2/rate-decisions (bench/decision.lua: no
#              Idempotency-Key, minor_units varies within the ceiling).
#              Every answer must be a 201. Afterwards the database must hold
#              one published decision per answer (plus those in flight when
#              wrk stopped) with 9 audit entries each, and pms-sim's
#              GET /written exactly 3 writes per decision, with the
#              decision's idempotency keys.
#
# pms-sim keeps at most PMS_SIM_CAPACITY (100,000, src/pms/pms_sim_core.h) writes
# and then answers 503, so a measured run is shortened (and says so) when
# DURATION seconds at the warm-up's (or probe's) rate would not fit. The
# reference uses a 1-second probe on a throwaway pms-sim for that.
#
# Environment:
#   DURATION     seconds per measurement (20), at most; see above
#   CONNECTIONS  wrk connections (32); a space-separated list ("16 32 64")
#                measures each in turn
#   RUNS         rounds (3)
#   THREADS      wrk threads (2)
#   WARMUP       warm-up seconds before each decisions measurement (3)
#   WORKERS      revopsd --workers (8, the server default); --threads = nproc
#   WRK_TIMEOUT  wrk --timeout (10s, revopsd's own PMS write timeout): a
#                slower answer is a socket timeout, and fails the run
#   BUILD        build directory holding revopsd/revopsctl/pms-sim (build;
#                relative to the repo root, or absolute)
#   RESULTS_DIR  if set, wrk outputs and summary.json are copied there
#   PERF         if 1, after the rounds profile revopsd with `perf record
#                --call-graph dwarf` for PERF_SECONDS (10) under the load of
#                the first CONNECTIONS value and print the top of `perf
#                report`; then, for TRACE_SECONDS (5; 0 = skip) under the same
#                load, `perf trace -s`: the time revopsd's threads spend in
#                each system call (sleeps and waits included), summed over
#                threads. RUNS=0 PERF=1 profiles only
#   KEEP         if 1, keep the work dir
#   QUIET_MAX, QUIET_BUSY, NOISY_CORES, NOISY_RETRIES  as in bench/run.sh:
#                wait for a quiet machine before each measurement, measure
#                again when other processes took more than NOISY_CORES cores
#
# Exit status: 0 when the measurements ran (targets met or MISSED are
# printed), non-zero when they could not run, an answer was not the expected
# 201 (200 from pms-sim), or the database and pms-sim disagree.
set -euo pipefail

DURATION=${DURATION:-20}
CONNECTIONS_LIST=${CONNECTIONS:-32}
RUNS=${RUNS:-3}
THREADS=${THREADS:-2}
WARMUP=${WARMUP:-3}
WORKERS=${WORKERS:-8}
WRK_TIMEOUT=${WRK_TIMEOUT:-10s}
BUILD=${BUILD:-build}
TRACE_SECONDS=${TRACE_SECONDS:-5}

# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

bench_resolve_build
bench_require_bins "$REVOPSD" "$REVOPSCTL" "$PMS_SIM"
bench_require_tools wrk curl python3
bench_init_workdir
REPORT=(python3 "$BENCH/decisions_report.py")

SIM_CAPACITY=$(sed -n 's/^#define PMS_SIM_CAPACITY[[:space:]]*\([0-9]*\).*/\1/p' \
  "$ROOT/src/pms/pms_sim_core.h" 2>/dev/null || true)
SIM_CAPACITY=${SIM_CAPACITY:-100000}
NPROPS=3
# The request values: a 3-night stay a month ahead, rates well inside the
# ceiling.
STAY_FROM=$(date -u -d '+30 days' +%F)
STAY_TO=$(date -u -d '+32 days' +%F)
export BENCH_FROM=$STAY_FROM BENCH_TO=$STAY_TO BENCH_MIN=40000 BENCH_SPAN=50000
CEILING_MAX=1000000

REVOPSD_PID=""
SIM_PID=""

bench_stop_servers() { # called by the exit trap after perf and wrk are stopped
  stop_pid "$REVOPSD_PID"
  stop_pid "$SIM_PID"
}

bench_print_machine "revops decisions bench"
echo "tools:   $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2); pms-sim (latency 0, 64 threads)"
echo "wrk:     -t$THREADS -c{$CONNECTIONS_LIST} -d${DURATION}s --latency --timeout $WRK_TIMEOUT (warm-up ${WARMUP}s), runs=$RUNS"
echo "server:  revopsd --threads $NPROC --workers $WORKERS --pms-url http://127.0.0.1:<pms-sim>;" \
  "pms-sim and wrk share the same $NPROC cores"
echo

# ---------------------------------------------------------------- processes
SIM_URL=""
start_sim() { # start_sim LOGFILE: a fresh pms-sim on a free port -> SIM_PID, SIM_URL
  local port
  "$PMS_SIM" --listen 127.0.0.1:0 2>"$1" >/dev/null &
  SIM_PID=$!
  wait_listening "$1" "$SIM_PID" pms-sim
  port=$(sed -n 's/.*"event":"listening".*port=\([0-9][0-9]*\).*/\1/p' "$1" | head -1)
  [ -n "$port" ] || { cat "$1" >&2; die "pms-sim did not log its port"; }
  SIM_URL="http://127.0.0.1:$port"
}

stop_sim() {
  stop_pid "$SIM_PID"
  SIM_PID=""
}

sim_written() { # sim_written OUTFILE: GET /written, saved
  curl -sf -o "$1" "$SIM_URL/written" || die "GET $SIM_URL/written failed"
}

# setup_data DIR: a fresh database with everything a decision needs; sets
# PF_ID, PROPS (ids, comma-separated; codes BD1..BD3), CEILING_ID, CLIENT_ID/SECRET.
APPROVER=approver@bench.example
setup_data() {
  local dir=$1 i ids=()
  local ctl=("$REVOPSCTL" --data-dir "$dir") cl="$dir/revopsctl.log"
  PF_ID=$("${ctl[@]}" portfolio create --name BenchDecisions --plan enterprise 2>>"$cl" | json_field id)
  for i in $(seq 1 "$NPROPS"); do
    ids+=("$("${ctl[@]}" property add --portfolio "$PF_ID" --name "Bench Hotel $i" \
      --brand BenchBrand --code "BD$i" --billing-id "BILL-$i" --timezone Europe/Warsaw \
      --currency PLN 2>>"$cl" | json_field id)")
  done
  PROPS=$(IFS=,; echo "${ids[*]}")
  CEILING_ID=$("${ctl[@]}" ceiling add --portfolio "$PF_ID" --brand BenchBrand --currency PLN \
    --max "$CEILING_MAX" --valid-from "$(date -u +%F)" 2>>"$cl" | json_field id)
  "${ctl[@]}" user create --portfolio "$PF_ID" --user-name "$APPROVER" --roles revenue-approver \
    >/dev/null 2>>"$cl"
  "${ctl[@]}" client create --portfolio "$PF_ID" --name bench --scopes "rates:write" \
    >"$dir/client.json" 2>>"$cl"
  CLIENT_ID=$(json_field client_id <"$dir/client.json")
  CLIENT_SECRET=$(json_field client_secret <"$dir/client.json")
  "${ctl[@]}" portfolio set-rate-limit --portfolio "$PF_ID" --per-minute 100000000 \
    >/dev/null 2>>"$cl"
}

REVOPSD_URL=""
start_revopsd() { # start_revopsd DIR: revopsd on DIR against SIM_URL; token -> BENCH_TOKEN
  local dir=$1
  REVOPSD_URL="http://127.0.0.1:$(free_port)"
  # --allow-private-targets: the PMS is on loopback (the SSRF guard would refuse it).
  "$REVOPSD" --listen "${REVOPSD_URL#http://}" --data-dir "$dir" --pms-url "$SIM_URL" \
    --allow-private-targets --log-format json --threads "$NPROC" --workers "$WORKERS" \
    2>"$dir/revopsd.log" >"$dir/revopsd-stdout.log" &
  REVOPSD_PID=$!
  wait_listening "$dir/revopsd.log" "$REVOPSD_PID" revopsd
  wait_http "$REVOPSD_URL/healthz" "$REVOPSD_PID" revopsd
  BENCH_TOKEN=$(curl -sf -u "$CLIENT_ID:$CLIENT_SECRET" -d grant_type=client_credentials \
    "$REVOPSD_URL/oauth/token" | json_field access_token) || die "could not get a token"
  export BENCH_TOKEN BENCH_PORTFOLIO="$PF_ID" BENCH_PROPERTIES="$PROPS" \
    BENCH_CEILING="$CEILING_ID" BENCH_APPROVER="$APPROVER"
}

stop_revopsd() {
  stop_pid "$REVOPSD_PID"
  REVOPSD_PID=""
}

smoke_decision() { # one decision with curl: must be a 201, published, 3 receipts
  local dir=$1 code props_json
  props_json="[\"${PROPS//,/\",\"}\"]"
  code=$(curl -s -o "$dir/smoke.json" -w '%{http_code}' -H "Authorization: Bearer $BENCH_TOKEN" \
    -H "X-Service-Portfolio: $PF_ID" -H 'Content-Type: application/json' \
    -d "{\"properties\":$props_json,\"room_type_code\":\"DBL\",\"date_range\":{\"from\":\"$STAY_FROM\",\"to\":\"$STAY_TO\"},\"proposed_rate\":{\"currency\":\"PLN\",\"minor_units\":45900},\"governance\":{\"brand_ceiling_id\":\"$CEILING_ID\",\"approver_saml_subject\":\"$APPROVER\",\"justification\":\"bench smoke test\"}}" \
    "$REVOPSD_URL/v2/rate-decisions") || true
  [ "$code" = 201 ] || { cat "$dir/smoke.json" >&2; die "smoke decision answered $code, not 201"; }
  python3 - "$dir/smoke.json" "$NPROPS" <<'EOF' || die "smoke decision is not published with $NPROPS receipts"
import json, sys
d = json.load(open(sys.argv[1]))["data"]
assert d["status"] == "published", d["status"]
assert len(d["pms_write_receipts"]) == int(sys.argv[2]), d["pms_write_receipts"]
EOF
}

# quiesce DB: wait (up to 20 s) until no decision is pending and the count
# holds still, i.e. revopsd finished the requests wrk left in flight; prints
# the counts line ("<decisions> <published> <pending> <audit entries>").
quiesce() {
  local prev="" cur _
  for _ in $(seq 1 100); do
    cur=$("${REPORT[@]}" counts "$1")
    if [ "$cur" = "$prev" ] && [ "$(echo "$cur" | cut -d' ' -f3)" = 0 ]; then
      echo "$cur"
      return 0
    fi
    prev=$cur
    sleep 0.2
  done
  die "decisions still pending 20 s after the load stopped: $cur"
}

# fit_seconds RATE BUDGET: DURATION, or fewer whole seconds so that RATE/s
# (plus 25 %) stays within BUDGET requests; at least 1.
fit_seconds() {
  awk -v r="$1" -v b="$2" -v d="$DURATION" 'BEGIN {
    s = (r > 0) ? int(b / (r * 1.25)) : d; if (s > d) s = d; if (s < 1) s = 1; print s }'
}

# ---------------------------------------------------------------- measurements
# measure_reference OUTFILE: pms-sim alone at CONNECTIONS.
measure_reference() {
  local out=$1 rate secs written requests
  export BENCH_CODES=BD1,BD2,BD3
  WRK_SCRIPT="$BENCH/pms_write.lua"
  start_sim "$W/sim-probe.log" # throwaway: a 1 s probe, also the warm-up of the box
  run_wrk "$SIM_URL/" 1 "$W/ref-probe.txt"
  "${REPORT[@]}" check-status "$W/ref-probe.txt" || { cat "$W/ref-probe.txt" >&2; die "pms-sim probe failed"; }
  rate=$(wrk_field "$W/ref-probe.txt")
  stop_sim
  secs=$(fit_seconds "$rate" "$SIM_CAPACITY")
  [ "$secs" -ge "$DURATION" ] || log "reference: ${secs}s, not ${DURATION}s" \
    "(the probe's $rate writes/s would overfill pms-sim's $SIM_CAPACITY writes)"
  start_sim "$W/sim-ref.log"
  wrk_measure "$SIM_URL/" "$SIM_PID" "$secs" "$out"
  "${REPORT[@]}" check-status "$out" || { cat "$out" >&2; die "reference: pms-sim did not answer 200 to every write"; }
  sim_written "$W/written.json"
  written=$("${REPORT[@]}" written "$W/written.json")
  requests=$(sed -n 's/^[[:space:]]*\([0-9][0-9]*\) requests in .*/\1/p' "$out")
  echo "bench-run: seconds=$secs sim_written=$written" >>"$out"
  # wrk counts the answers it read in time; pms-sim also made those in flight.
  if [ "$written" -lt "$requests" ] || [ "$written" -gt $((requests + CONNECTIONS)) ]; then
    die "reference: pms-sim holds $written writes for wrk's $requests answers"
  fi
  stop_sim
  rm -f "$W/written.json"
}

LAST_RATE=""
# start_fresh DIR: an empty DIR, seeded, with pms-sim and revopsd running and
# one decision published through them.
start_fresh() {
  local dir=$1
  rm -rf "$dir"
  mkdir -p "$dir"
  setup_data "$dir"
  start_sim "$dir/pms-sim.log"
  start_revopsd "$dir"
  smoke_decision "$dir"
}

# measure_decisions OUTFILE: revopsd + pms-sim, fresh, at CONNECTIONS.
measure_decisions() {
  local out=$1 dir="$W/run" c0 c1 p0 p1 rate secs requests
  start_fresh "$dir"
  WRK_SCRIPT="$BENCH/decision.lua"
  run_wrk "$REVOPSD_URL/v2/rate-decisions" "$WARMUP" "$W/warmup.txt"
  "${REPORT[@]}" check-status "$W/warmup.txt" || { cat "$W/warmup.txt" >&2; die "warm-up: not every decision was a 201"; }
  rate=$(wrk_field "$W/warmup.txt")
  c0=$(quiesce "$dir/revops.db")
  p0=$(echo "$c0" | cut -d' ' -f2)
  secs=$(fit_seconds "$rate" $((SIM_CAPACITY / NPROPS - p0 - CONNECTIONS)))
  [ "$secs" -ge "$DURATION" ] || log "decisions: ${secs}s, not ${DURATION}s" \
    "(the warm-up's $rate decisions/s would overfill pms-sim's $SIM_CAPACITY writes)"
  wrk_measure "$REVOPSD_URL/v2/rate-decisions" "$REVOPSD_PID $SIM_PID" "$secs" "$out" \
    "revopsd=$REVOPSD_PID"
  "${REPORT[@]}" check-status "$out" || { cat "$out" >&2; die "decisions: not every answer was a 201"; }
  c1=$(quiesce "$dir/revops.db")
  p1=$(echo "$c1" | cut -d' ' -f2)
  requests=$(sed -n 's/^[[:space:]]*\([0-9][0-9]*\) requests in .*/\1/p' "$out")
  echo "bench-run: seconds=$secs warmup_rps=$rate db_published=$((p1 - p0)) db_total=$p1" >>"$out"
  # The database gains wrk's answers plus the requests in flight when it stopped.
  if [ $((p1 - p0)) -lt "$requests" ] || [ $((p1 - p0)) -gt $((requests + CONNECTIONS)) ]; then
    die "decisions: the database gained $((p1 - p0)) published decisions for wrk's $requests 201s"
  fi
  sim_written "$dir/written.json"
  "${REPORT[@]}" verify "$dir/revops.db" "$dir/written.json" "$NPROPS" >>"$out" \
    || { tail -1 "$out" >&2; die "decisions: the database and pms-sim's writes disagree"; }
  LAST_RATE=$(wrk_field "$out")
  stop_revopsd
  stop_sim
  if [ "$KEEP" != 1 ]; then rm -rf "$dir"; fi
}

say() { # say OUTFILE WHAT: one progress line
  printf 'bench: %-22s %9s req/s  p99 %s  %s\n' "$2" "$(wrk_field "$1")" \
    "$(sed -n 's/^[[:space:]]*99%[[:space:]]*//p' "$1")" "$(sed -n 's/^bench-cpu: //p' "$1")" >&2
}

for round in $(seq 1 "$RUNS"); do
  for CONNECTIONS in $CONNECTIONS_LIST; do
    out="$RES/r$round-c$CONNECTIONS-ref.txt"
    measure_quiet "run $round c=$CONNECTIONS reference" "$out" measure_reference "$out"
    say "$out" "run $round c=$CONNECTIONS pms-sim"
    out="$RES/r$round-c$CONNECTIONS-decisions.txt"
    measure_quiet "run $round c=$CONNECTIONS decisions" "$out" measure_decisions "$out"
    say "$out" "run $round c=$CONNECTIONS decisions"
  done
done

if [ "$RUNS" -gt 0 ]; then
  echo
  "${REPORT[@]}" summary "$RES"
fi

# ---------------------------------------------------------------- profile
if [ "$PERF" = 1 ]; then
  command -v perf >/dev/null || die "PERF=1 but perf is not installed"
  CONNECTIONS=${CONNECTIONS_LIST%% *}
  # Keep the whole load within pms-sim's capacity at the last measured rate.
  if [ -n "$LAST_RATE" ]; then
    fit=$(awk -v r="$LAST_RATE" -v b="$((SIM_CAPACITY / NPROPS - 1000))" \
      -v w="$((WARMUP + TRACE_SECONDS + 2))" 'BEGIN { print int(b / (r * 1.25)) - w }')
    if [ "$fit" -lt "$PERF_SECONDS" ]; then
      [ "$fit" -ge 3 ] || fit=3
      log "profile: ${fit}s, not ${PERF_SECONDS}s (pms-sim capacity at $LAST_RATE decisions/s)"
      PERF_SECONDS=$fit
    fi
  fi
  echo
  echo "== perf profile of revopsd, ${PERF_SECONDS}s of 3-property decisions at -c$CONNECTIONS"
  dir="$W/run"
  start_fresh "$dir"
  wrk -t"$THREADS" -c"$CONNECTIONS" -d"$((WARMUP + PERF_SECONDS + TRACE_SECONDS + 2))"s --latency \
    --timeout "$WRK_TIMEOUT" -s "$BENCH/decision.lua" "$REVOPSD_URL/v2/rate-decisions" \
    >"$RES/perf-wrk.txt" 2>&1 &
  WRK_PID=$!
  sleep "$WARMUP"
  perf_record "$REVOPSD_PID"
  if [ "$TRACE_SECONDS" -gt 0 ]; then
    # Where revopsd's threads wait (off-CPU), which perf record's CPU profile
    # does not show: time in each system call, summed over the threads.
    perf trace -s -p "$REVOPSD_PID" -o "$RES/perf-trace.txt" -- sleep "$TRACE_SECONDS" \
      >"$W/perf-trace.log" 2>&1 &
    PERF_PID=$!
    wait "$PERF_PID" || { cat "$W/perf-trace.log" >&2; die "perf trace failed"; }
    PERF_PID=""
  fi
  wait "$WRK_PID" || true
  WRK_PID=""
  "${REPORT[@]}" check-status "$RES/perf-wrk.txt" \
    || log "WARNING: not every decision during the profile was a 201"
  echo "-- load during the profile: $(wrk_field "$RES/perf-wrk.txt") decisions/s"
  perf_summary
  if [ "$TRACE_SECONDS" -gt 0 ]; then
    echo "-- system calls of revopsd over ${TRACE_SECONDS}s under the same load (perf trace -s)"
    "${REPORT[@]}" syscalls "$RES/perf-trace.txt" "$TRACE_SECONDS" | tee "$RES/perf-syscalls.txt"
  fi
  stop_revopsd
  stop_sim
fi
