#!/usr/bin/env bash
# revops benchmark: webhook delivery throughput and latency. revopsd's
# delivery engine sends v2 deliveries to nginx over HTTPS on loopback; the
# reference is wrk POSTing the same kind of request to the same nginx.
#
#   bench/webhooks.sh                   (from the repo root, after `make build`)
#   BIN_DIR=/work/engine-bin bench/webhooks.sh     (binaries from elsewhere)
#   PENDING_BIG=20000 DURATION=5 bench/webhooks.sh (a quick run)
#
# Everything runs on 127.0.0.1 on free ports, in a mktemp -d work dir that
# is removed at the end; every process started here is stopped on exit.
#
# Steps:
#   tls        openssl: a throwaway CA and a server certificate for
#              127.0.0.1 (IP SAN), signed by it (KEY_TYPE ec|rsa).
#   nginx      HTTPS on a free loopback port, keep-alive, worker_processes
#              nproc, access log off: `return 204;` to a POST on /hook/N;
#              stub_status on a second (plain HTTP) port, read at each
#              window's start and end: new connections vs requests shows
#              whether the engine keeps its connections alive.
#   reference  wrk -tREF_THREADS -cREF_CONNECTIONS --latency for DURATION
#              seconds (after a WARMUP-second warm-up), POSTing a
#              BODY_BYTES-byte JSON body with the delivery headers to
#              /hook/1..URLS in turn (bench/webhooks_post.lua). Every answer
#              must be a 204.
#   1k         revopsd --allow-private-targets --trust-ca <CA>
#              --webhook-uncapped; an enterprise portfolio, a client with
#              webhooks:manage, URLS v2 subscriptions to
#              https://127.0.0.1:<nginx>/hook/i for sso.user.provisioned; a
#              ping must arrive (delivered) before anything is measured. Then
#              one `revopsctl event emit --count -` tops the backlog up every 50 ms to
#              about PENDING_SMALL deliveries outstanding (not yet delivered,
#              including events not yet fanned out x URLS); after WARMUP
#              seconds, deliveries/s over DURATION seconds: rows with
#              state 'delivered' in webhook_deliveries at the window's end
#              minus at its start (bench/webhooks_report.py measure; Python's
#              sqlite3 module, read-only. The count is taken from indexes:
#              all rows - not final (partial index _due) - dead-lettered,
#              since a plain count(*) WHERE state = 'delivered' scans ~1 GB
#              at 1M rows; after each window both are taken in one snapshot
#              and any difference is reported).
#   latency    after the 1k window, once the backlog has drained: for the
#              deliveries of the events created in the window, webhook_attempts
#              n=1 started_at minus event_created_at: p50, p99.
#   perf       (PERF=1 only) after the 1k window, a profile under the same load.
#   1M         revopsd stopped; `revopsctl event emit --count
#              ceil(PENDING_BIG / URLS)` (PENDING_BIG deliveries once fanned
#              out); revopsd restarted; wait until the fan-out cursor reaches
#              the last event (FANOUT_TIMEOUT), then deliveries/s over
#              DURATION seconds the same way (no feeding).
#   summary    reference req/s; deliveries/s at 1k pending and its ratio to
#              the reference (target >= 0.30); latency p50/p99 (target p99
#              <= 500 ms); deliveries/s at PENDING_BIG pending and its ratio
#              to the 1k figure (target >= 0.8). Each with the CPU used by
#              revopsd, nginx, this benchmark's own processes and the rest.
#
# Environment:
#   DURATION        seconds per measured window (20)
#   URLS            v2 subscriptions, one nginx path each (32; at most 50,
#                   the per-portfolio limit)
#   PENDING_SMALL   deliveries kept outstanding in the 1k phase (1000)
#   PENDING_BIG     deliveries made pending for the 1M phase (1000000)
#   PHASES          which steps to run ("ref 1k 1m"); "ref" alone needs no
#                   revops binaries; 1m needs 1k's set-up, so it implies it
#   WARMUP          warm-up seconds before the reference and the 1k window (3)
#   REF_THREADS     wrk threads for the reference (1)
#   REF_CONNECTIONS wrk connections for the reference (64)
#   BODY_BYTES      reference request body size (500)
#   KEY_TYPE        ec (P-256, the default) or rsa (2048) server key
#   FANOUT_TIMEOUT  seconds to wait for the 1M fan-out (1800); past it the
#                   window is measured anyway, and the summary says so
#   REVOPSD_ARGS    extra revopsd arguments (word-split)
#   BUILD           build directory holding revopsd/revopsctl (build;
#                   relative to the repo root, or absolute)
#   BIN_DIR         overrides BUILD (e.g. /work/engine-bin); REVOPS_BIN_DIR too
#   RESULTS_DIR     if set, the results (wrk output, JSON) are copied there
#   PERF            if 1, after the 1k window profile revopsd with `perf
#                   record --call-graph dwarf` for PERF_SECONDS (10) under the
#                   same 1k-pending load and print the top of `perf report`
#   FEED_TICK_MS    milliseconds between the 1k feeder's top-ups (50)
#   KEEP            if 1, keep the work dir (data dir, logs, certificates)
#   QUIET_MAX, QUIET_BUSY  before the reference and each phase, wait up to
#                   QUIET_MAX seconds (60) for the machine to be at most
#                   QUIET_BUSY (0.10) busy; NOISY_CORES, NOISY_RETRIES: the
#                   reference is measured again (up to 2 times) when other
#                   processes took more than NOISY_CORES (0.10) cores
#
# Exit status: 0 when the measurements ran (targets met or MISSED are
# printed); non-zero only when they could not run (a tool or binary missing,
# nginx or revopsd not starting, an API call failing, the ping not
# delivered, a reference answer other than 204).
set -euo pipefail

DURATION=${DURATION:-20}
URLS=${URLS:-32}
PENDING_SMALL=${PENDING_SMALL:-1000}
PENDING_BIG=${PENDING_BIG:-1000000}
PHASES=${PHASES:-ref 1k 1m}
WARMUP=${WARMUP:-3}
REF_THREADS=${REF_THREADS:-1}
REF_CONNECTIONS=${REF_CONNECTIONS:-64}
BODY_BYTES=${BODY_BYTES:-500}
KEY_TYPE=${KEY_TYPE:-ec}
FANOUT_TIMEOUT=${FANOUT_TIMEOUT:-1800}
REVOPSD_ARGS=${REVOPSD_ARGS:-}
BUILD=${BIN_DIR:-${REVOPS_BIN_DIR:-${BUILD:-build}}}

# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"

has_phase() { case " $PHASES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
has_phase 1m && ! has_phase 1k && PHASES="$PHASES 1k"
if [ "$URLS" -lt 1 ] || [ "$URLS" -gt 50 ]; then
  die "URLS must be 1..50 (one portfolio holds at most 50 subscriptions)"
fi

bench_resolve_build
if has_phase 1k; then bench_require_bins "$REVOPSD" "$REVOPSCTL"; fi
bench_require_tools wrk nginx openssl curl python3
NGINX=$(command -v nginx)
bench_init_workdir
REPORT=(python3 "$BENCH/webhooks_report.py")

REVOPSD_PID=""
NGINX_PID=""
bench_stop_servers() { # called by the exit trap after perf and wrk are stopped
  stop_pid "$REVOPSD_PID"
  stop_pid "$NGINX_PID" QUIT
}

if has_phase 1k; then
  bench_print_machine "revops webhooks bench"
else
  echo "== revops webhooks bench (reference only) $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "machine: nproc=$NPROC kernel=$(uname -r) loadavg=$(cut -d' ' -f1-3 /proc/loadavg)"
fi
echo "tools:   $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2); $("$NGINX" -v 2>&1); $(openssl version | cut -d' ' -f1-2)"
echo "phases:  $PHASES; DURATION=${DURATION}s URLS=$URLS PENDING_SMALL=$PENDING_SMALL PENDING_BIG=$PENDING_BIG KEY_TYPE=$KEY_TYPE"
echo "all processes (revopsd, nginx worker_processes $NPROC, wrk, sqlite readers) share the same $NPROC cores"
echo
cat >"$RES/settings.json" <<EOF
{"duration": $DURATION, "urls": $URLS, "pending_small": $PENDING_SMALL, "pending_big": $PENDING_BIG,
 "ref_threads": $REF_THREADS, "ref_connections": $REF_CONNECTIONS, "body_bytes": $BODY_BYTES,
 "key_type": "$KEY_TYPE", "warmup": $WARMUP, "nproc": $NPROC}
EOF

# ---------------------------------------------------------------- TLS
TLS="$W/tls"
mkdir -p "$TLS"
case "$KEY_TYPE" in
  ec) KEYOPT=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1) ;;
  rsa) KEYOPT=(-newkey rsa:2048) ;;
  *) die "KEY_TYPE must be ec or rsa" ;;
esac
{
  openssl req -x509 "${KEYOPT[@]}" -nodes -keyout "$TLS/ca.key" -out "$TLS/ca.crt" -days 3 \
    -subj "/CN=revops bench CA" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign"
  openssl req "${KEYOPT[@]}" -nodes -keyout "$TLS/server.key" -out "$TLS/server.csr" \
    -subj "/CN=127.0.0.1"
  printf '%s\n' "subjectAltName=IP:127.0.0.1" "basicConstraints=critical,CA:FALSE" \
    "keyUsage=critical,digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth" \
    >"$TLS/server.ext"
  openssl x509 -req -in "$TLS/server.csr" -CA "$TLS/ca.crt" -CAkey "$TLS/ca.key" \
    -set_serial "0x$(openssl rand -hex 8)" -days 3 -extfile "$TLS/server.ext" -out "$TLS/server.crt"
  openssl verify -CAfile "$TLS/ca.crt" "$TLS/server.crt"
} >"$TLS/openssl.log" 2>&1 || { cat "$TLS/openssl.log" >&2; die "could not make the test CA and certificate"; }
log "test CA $TLS/ca.crt, server certificate for IP 127.0.0.1 ($KEY_TYPE)"

# ---------------------------------------------------------------- nginx
NGINX_PORT=$(free_port)
STATUS_PORT=$(free_port)
NGINX_STATUS="http://127.0.0.1:$STATUS_PORT/status"
HOOK_BASE="https://127.0.0.1:$NGINX_PORT"
mkdir -p "$W/nginx-tmp"
NGX_V=$("$NGINX" -V 2>&1)
case "$NGX_V" in *--with-http_ssl_module*) ;; *) die "this nginx has no http_ssl_module" ;; esac
temp_paths=$(nginx_temp_paths "$NGX_V")
nginx_conf_main 4096 >"$W/nginx.conf"
cat >>"$W/nginx.conf" <<EOF
http {
    access_log off;
    tcp_nodelay on;
    keepalive_timeout 65;
    keepalive_requests 10000000;
    server_tokens off;
    client_body_buffer_size 16k;
    client_max_body_size 1m;
    types { }
    default_type application/json;
    $temp_paths
    server {
        listen 127.0.0.1:$NGINX_PORT ssl;
        ssl_certificate $TLS/server.crt;
        ssl_certificate_key $TLS/server.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_cache shared:bench:10m;
        ssl_session_timeout 1h;
        location ~ ^/hook/[0-9]+\$ {
            if (\$request_method != POST) { return 405; }
            return 204;
        }
        location / { return 404; }
    }
    server { # plain HTTP: connections accepted and requests served (keep-alive reuse)
        listen 127.0.0.1:$STATUS_PORT;
        location = /status { stub_status; }
    }
}
EOF
nginx_start
# A verified POST (CA, IP SAN) must get the 204, as the engine's will.
for _ in $(seq 1 100); do
  kill -0 "$NGINX_PID" 2>/dev/null || { cat "$W/nginx-error.log" >&2; die "nginx exited during start-up"; }
  code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$TLS/ca.crt" -X POST \
    -H 'Content-Type: application/json' -d '{"ping":true}' "$HOOK_BASE/hook/1" || true)
  [ "$code" = 204 ] && break
  sleep 0.1
done
[ "$code" = 204 ] || die "nginx did not answer 204 to a verified HTTPS POST on $HOOK_BASE/hook/1 (got $code)"
log "nginx: HTTPS on $HOOK_BASE, POST /hook/N -> 204 (certificate verified by curl)"

# ---------------------------------------------------------------- reference
if has_phase ref; then
  THREADS=$REF_THREADS CONNECTIONS=$REF_CONNECTIONS WRK_SCRIPT="$BENCH/webhooks_post.lua"
  export BENCH_URLS=$URLS BENCH_BODY_BYTES=$BODY_BYTES
  measure_quiet "reference" "$RES/ref.txt" measure_once "$HOOK_BASE/hook/1" "$NGINX_PID" "$RES/ref.txt"
  "${REPORT[@]}" check-status "$RES/ref.txt" || { cat "$RES/ref.txt" >&2; die "reference: not every answer was a 204"; }
  log "reference: $(wrk_field "$RES/ref.txt") req/s  $(sed -n 's/^bench-cpu: //p' "$RES/ref.txt")"
fi

# ---------------------------------------------------------------- revopsd
D="$W/data"
DB="$D/revops.db"
REVOPSD_URL=""
START_N=0
start_revopsd() { # a fresh log per start (wait_listening looks for "listening")
  START_N=$((START_N + 1))
  local logf="$D/revopsd-$START_N.log"
  REVOPSD_URL="http://127.0.0.1:$(free_port)"
  # shellcheck disable=SC2086 # REVOPSD_ARGS is meant to be word-split
  "$REVOPSD" --listen "${REVOPSD_URL#http://}" --data-dir "$D" --log-format json \
    --threads "$NPROC" --allow-private-targets --trust-ca "$TLS/ca.crt" --webhook-uncapped \
    $REVOPSD_ARGS 2>"$logf" >"$D/revopsd-stdout-$START_N.log" &
  REVOPSD_PID=$!
  wait_listening "$logf" "$REVOPSD_PID" revopsd
  wait_http "$REVOPSD_URL/healthz" "$REVOPSD_PID" revopsd
}

stop_revopsd() {
  stop_pid "$REVOPSD_PID"
  REVOPSD_PID=""
}

api() { # api METHOD PATH [BODY]: -> $API_CODE, body in $W/api.json
  local args=(-s -o "$W/api.json" -w '%{http_code}' -X "$1" -H "Authorization: Bearer $TOKEN"
              -H "X-Service-Portfolio: $PF_ID")
  [ $# -lt 3 ] || args+=(-H 'Content-Type: application/json' -d "$3")
  API_CODE=$(curl "${args[@]}" "$REVOPSD_URL$2") || API_CODE=000
}

errors_line() { "${REPORT[@]}" errors "$DB" 2>/dev/null || echo "(could not read $DB)"; }

if has_phase 1k; then
  mkdir -p "$D"
  CTL=("$REVOPSCTL" --data-dir "$D")
  PF_ID=$("${CTL[@]}" portfolio create --name BenchWebhooks --plan enterprise 2>>"$D/revopsctl.log" | json_field id) \
    || die "revopsctl portfolio create failed (see $D/revopsctl.log)"
  "${CTL[@]}" client create --portfolio "$PF_ID" --name bench --scopes "webhooks:manage" \
    >"$D/client.json" 2>>"$D/revopsctl.log" || die "revopsctl client create failed"
  CLIENT_ID=$(json_field client_id <"$D/client.json")
  CLIENT_SECRET=$(json_field client_secret <"$D/client.json")
  "${CTL[@]}" portfolio set-rate-limit --portfolio "$PF_ID" --per-minute 100000000 \
    >/dev/null 2>>"$D/revopsctl.log" || die "revopsctl portfolio set-rate-limit failed"

  wait_quiet
  start_revopsd
  TOKEN=$(curl -sf -u "$CLIENT_ID:$CLIENT_SECRET" -d grant_type=client_credentials \
    "$REVOPSD_URL/oauth/token" | json_field access_token) || die "could not get a token"
  SUBS=()
  for i in $(seq 1 "$URLS"); do
    api POST /v2/webhooks "{\"url\":\"$HOOK_BASE/hook/$i\",\"events\":[\"sso.user.provisioned\"],\"description\":\"bench $i\"}"
    [ "$API_CODE" = 201 ] || { cat "$W/api.json" >&2; die "POST /v2/webhooks answered $API_CODE, not 201"; }
    SUBS+=("$(python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["id"])' <"$W/api.json")")
  done
  log "portfolio $PF_ID: $URLS v2 subscriptions to $HOOK_BASE/hook/1..$URLS"
  # Smoke test: a ping must be delivered (trust of the test CA, private target).
  api POST "/v2/webhooks/${SUBS[0]}/ping"
  [ "$API_CODE" = 202 ] || { cat "$W/api.json" >&2; die "POST /v2/webhooks/${SUBS[0]}/ping answered $API_CODE, not 202"; }
  PING_DLV=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["deliveries"][0]["id"])' <"$W/api.json")
  "${REPORT[@]}" wait-delivery "$DB" "$PING_DLV" 20 || die "the ping was not delivered (see above and $D/revopsd-1.log)"
  log "ping $PING_DLV delivered"

  # ------------------------------------------------------------ 1k pending
  wait_quiet
  log "1k pending: ${WARMUP}s warm-up, then ${DURATION}s measured, ~$PENDING_SMALL deliveries outstanding"
  FEED=(--feed "$PENDING_SMALL" --ctl "$REVOPSCTL" --data-dir "$D" --portfolio "$PF_ID" --urls "$URLS")
  "${REPORT[@]}" measure "$DB" --out "$RES/1k.json" --label "1k pending" --warmup "$WARMUP" \
    --duration "$DURATION" "${FEED[@]}" --pid "revopsd=$REVOPSD_PID" --pid "nginx=$NGINX_PID" \
    --nginx-status "$NGINX_STATUS" || die "the 1k-pending measurement failed"
  T0=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["start"]["t"])' "$RES/1k.json")
  T1=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["end"]["t"])' "$RES/1k.json")

  if [ "$PERF" = 1 ]; then
    command -v perf >/dev/null || die "PERF=1 but perf is not installed"
    echo "== perf profile of revopsd, ${PERF_SECONDS}s at ~$PENDING_SMALL deliveries outstanding"
    "${REPORT[@]}" measure "$DB" --out "$RES/perf-load.json" --label "load during the profile" \
      --warmup 1 --duration "$((PERF_SECONDS + 1))" --no-exact "${FEED[@]}" \
      --pid "revopsd=$REVOPSD_PID" --pid "nginx=$NGINX_PID" &
    FEED_PID=$!
    sleep 1.5
    perf_record "$REVOPSD_PID"
    wait "$FEED_PID" || die "the feeder failed during the profile"
    perf_summary
    echo
  fi

  secs=$("${REPORT[@]}" drain "$DB" 120) || log "WARNING: the 1k backlog did not drain"
  log "1k backlog drained in ${secs}s"
  "${REPORT[@]}" latency "$DB" --out "$RES/latency.json" --portfolio "$PF_ID" --from "$T0" --to "$T1" \
    || die "latency query failed"
  log "after the 1k phase: $(errors_line)"
fi

# ---------------------------------------------------------------- 1M pending
if has_phase 1m; then
  stop_revopsd
  NEV=$(( (PENDING_BIG + URLS - 1) / URLS ))
  log "1M pending: revopsd stopped; emitting $NEV events ($((NEV * URLS)) deliveries once fanned out)"
  t=$(date +%s.%N)
  "${CTL[@]}" event emit --portfolio "$PF_ID" --type sso.user.provisioned --count "$NEV" \
    >"$W/emit.json" 2>>"$D/revopsctl.log" || die "revopsctl event emit --count $NEV failed"
  log "emitted $(json_field emitted <"$W/emit.json") events in" \
    "$(awk -v t="$t" -v n="$(date +%s.%N)" 'BEGIN { printf "%.1f", n - t }')s"
  wait_quiet
  "${REPORT[@]}" snapshot "$DB" --out "$W/before-restart.json" --pid "nginx=$NGINX_PID" \
    || die "could not read $DB"
  start_revopsd
  log "revopsd restarted (pid $REVOPSD_PID); waiting for the fan-out"
  "${REPORT[@]}" fanout-wait "$DB" --out "$RES/fanout.json" --before "$W/before-restart.json" \
    --timeout "$FANOUT_TIMEOUT" --pid "revopsd=$REVOPSD_PID" --pid "nginx=$NGINX_PID" \
    || die "fan-out wait failed"
  "${REPORT[@]}" measure "$DB" --out "$RES/1m.json" --label "$PENDING_BIG pending" \
    --duration "$DURATION" --pid "revopsd=$REVOPSD_PID" --pid "nginx=$NGINX_PID" \
    --nginx-status "$NGINX_STATUS" || die "the big-backlog measurement failed"
  log "after the 1M window: $(errors_line)"
  stop_revopsd
fi

echo
"${REPORT[@]}" summary "$RES"
if [ -n "$REVOPSD_PID" ] || [ -f "$D/revopsd-1.log" ]; then
  w=$(cat "$D"/revopsd-*.log 2>/dev/null | grep -c -e '"level":"error"' -e '"level":"warn' || true)
  [ "${w:-0}" = 0 ] || echo "revopsd logged $w warning/error lines (KEEP=1 keeps $D/revopsd-*.log)"
fi
