#!/usr/bin/env bash
# Runs the libFuzzer drivers of a BUILD_FUZZER build (`make fuzz`), one at a
# time, each for SECONDS with its seed corpus, its regressions, its
# dictionary and inputs up to the real limit of what it parses. New inputs
# go to BUILD/fuzz-corpus/<target> (kept between runs, never into the
# repository), crash inputs to BUILD/fuzz-artifacts/<target>/, logs to
# BUILD/fuzz-logs/<target>.log. Any crash, leak, timeout (10 s for one
# input) or out-of-memory fails the run after all drivers have run.
#
# usage: fuzz/run.sh BUILD SECONDS [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 BUILD SECONDS [TARGET...]" >&2; exit 2; }
build=$1 secs=$2; shift 2

head_max=32768         # a request head: HTTP_HEAD_MAX in src/http/http_parse.h
body_max=1048576       # a request body: HTTP_BODY_MAX in src/http/http.h
# -max_len of each target: the largest input the server can hand its parser.
declare -A max_len=(
  [json]=$body_max                      # a JSON request body
  [form]=$body_max                      # a form body (POST /oauth/token)
  [cursor]=257                          # PAGINATION_CURSOR_MAX + 1: longer is refused unread
  [saml]=65537                          # SAML_MAX_XML + 1
  [scim_filter]=4097                    # SCIM_FILTER_MAX_LEN + 1: longer is refused unread
  [http_check]=$head_max                # a request head
  [http_fields]=$head_max               # one request field value (inside a head)
  [egress]=8192                         # a webhook URL: 2048 code points (webhook specs)
  [scim_patch]=$body_max                # a PATCH body
  [scim_resource]=$body_max             # a POST/PUT body
  [token]=$((head_max + body_max))      # an Authorization header line and a form body
  [write_specs]=$body_max               # a JSON write body
  [idempotency]=$((head_max + body_max)) # an Idempotency-Key header line and a body
  [router]=$head_max                    # a method and path from a request head
  [clock]=63                            # a feed date-time: 40 characters at most (feed specs)
  [tz]=524289                           # a TZif file: TZ_FILE_MAX + 1 (src/core/tz.h)
  [http_parse]=$((2 * body_max))        # a connection: heads, and a body up to the cap in
                                        # chunked framing, with room past it for 413
)

all=()
for d in fuzz/*/; do
  t=$(basename "$d")
  [ -f "$d/fuzz_$t.c" ] || continue
  [ -n "${max_len[$t]:-}" ] || { echo "fuzz/run.sh: no max_len for target $t" >&2; exit 2; }
  all+=("$t")
done
[ $# -gt 0 ] && targets=("$@") || targets=("${all[@]}")

failed=()
printf '%-14s %10s %9s %6s %7s %6s\n' target execs exec/s cov ft corpus
for t in "${targets[@]}"; do
  bin=$build/fuzz/fuzz_$t
  [ -x "$bin" ] || { echo "fuzz/run.sh: $bin is not built" >&2; exit 2; }
  work=$build/fuzz-corpus/$t art=$build/fuzz-artifacts/$t log=$build/fuzz-logs/$t.log
  mkdir -p "$work" "$art" "$(dirname "$log")"
  args=(-max_total_time="$secs" -max_len="${max_len[$t]}" -timeout=10 -rss_limit_mb=2048
        -print_final_stats=1 -artifact_prefix="$art/")
  [ -f "fuzz/$t/$t.dict" ] && args+=(-dict="fuzz/$t/$t.dict")
  dirs=("$work" "fuzz/$t/corpus")
  [ -d "fuzz/$t/regressions" ] && dirs+=("fuzz/$t/regressions")
  rc=0
  "$bin" "${args[@]}" "${dirs[@]}" >"$log" 2>&1 || rc=$?
  done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 || true)
  printf '%-14s %10s %9s %6s %7s %6s\n' "$t" \
    "$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")" \
    "$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")" \
    "$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$done_line")" \
    "$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$done_line")" \
    "$(sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p' <<<"$done_line")"
  if [ $rc -ne 0 ]; then
    failed+=("$t")
    echo "fuzz/run.sh: fuzz_$t failed (exit $rc); the end of $log:" >&2
    grep -v '^#[0-9]' "$log" | tail -40 >&2
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz/run.sh: failed: ${failed[*]}; crash inputs in $build/fuzz-artifacts/<target>/" >&2
  echo "fuzz/run.sh: fix the bug, then keep each input under fuzz/<target>/regressions/" >&2
  exit 1
fi
