#!/usr/bin/env bash
# Instructions per request for the authenticated property list, counted by
# valgrind's callgrind: a figure machine load does not move, for changes on
# the request path whose effect is below the load benchmark's noise.
#
#   bench/callgrind.sh                 (after `make build`)
#   BUILD=/other/build bench/callgrind.sh   (e.g. a worktree of the parent commit)
#
# revopsd --demo runs under callgrind twice, once serving N1 and once N2
# requests on one keep-alive connection (after the same warm-up); the
# difference of the two totals over N2 - N1 is the cost of one request,
# start-up and shutdown cancelling out. Only the HTTP thread is counted
# (revopsd --threads 1: it reads, parses, runs the read handler with
# SQLite, and writes); background threads, which run for as long as the
# slow valgrind run lasts, are not. The HTTP thread is the one whose
# profile holds the server's entry function (on_request with
# libmicrohttpd, loop_main with our own server); libraries without symbols
# count in full, as the thread's total.
#
# Environment: BUILD (build), N1 (200), N2 (1200), PATH_KIND (properties).
set -euo pipefail

BUILD=${BUILD:-build}
N1=${N1:-200}
N2=${N2:-1200}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
command -v valgrind >/dev/null || { echo "valgrind not found" >&2; exit 1; }

W=$(mktemp -d)
trap '[ "${KEEP:-0}" = 1 ] && echo "kept $W" || rm -rf "$W"' EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# run N: total instructions of a revopsd run that served N property lists.
run() {
  local n=$1 port dir pid out
  port=$(free_port)
  dir="$W/data-$n"
  out="$W/cg-$n.out"
  mkdir -p "$dir"
  valgrind --tool=callgrind --callgrind-out-file="$out" --trace-children=no \
    --separate-threads=yes \
    "$BUILD/revopsd" --demo --data-dir "$dir" --listen "127.0.0.1:$port" --threads 1 \
    2>"$W/log-$n" &
  pid=$!
  python3 - "$port" "$dir" "$n" <<'EOF'
import base64, http.client, json, sys, time
port, d, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
deadline = time.time() + 120
while True:
    try:
        creds = json.load(open(d + "/demo-credentials.json"))
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("GET", "/healthz"); c.getresponse().read()
        break
    except Exception:
        if time.time() > deadline:
            raise
        time.sleep(0.2)
p = creds["portfolios"][0]
basic = base64.b64encode(("%s:%s" % (p["client_id"], p["client_secret"])).encode()).decode()
c.request("POST", "/oauth/token", "grant_type=client_credentials",
          {"Authorization": "Basic " + basic,
           "Content-Type": "application/x-www-form-urlencoded"})
tok = json.loads(c.getresponse().read())["access_token"]
hdrs = {"Authorization": "Bearer " + tok, "X-Service-Portfolio": p["portfolio_id"]}
path = "/v2/portfolios/%s/properties" % p["portfolio_id"]
for _ in range(50):  # warm-up: statement cache, token cache
    c.request("GET", path, headers=hdrs); r = c.getresponse(); r.read()
for _ in range(n):
    c.request("GET", path, headers=hdrs); r = c.getresponse(); r.read()
    assert r.status == 200, r.status
EOF
  kill -TERM "$pid"
  wait "$pid" || true
  local f
  for f in "$out"-*; do
    if grep -qE '^c?fn=\([0-9]+\) (on_request|loop_main)$' "$f"; then
      awk '/^totals:|^summary:/ {print $2; exit}' "$f"
      return
    fi
  done
  echo "no HTTP thread found in $out-*" >&2
  exit 1
}

t1=$(run "$N1")
t2=$(run "$N2")
per=$(( (t2 - t1) / (N2 - N1) ))
echo "revopsd: $BUILD/revopsd"
echo "totals: N1=$N1 -> $t1 Ir, N2=$N2 -> $t2 Ir"
echo "instructions per GET /v2/portfolios/{id}/properties: $per"
