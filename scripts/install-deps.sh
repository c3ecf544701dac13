#!/usr/bin/env bash
# Installs the Debian packages revops needs to build, run and test, but only
# those missing, so `make run` / `make test` stay fast on a prepared machine.
# postgresql-15 is the server the tests start throw-away clusters of
# (scripts/pg-test-cluster.sh); libpq-dev the client every build links;
# haproxy the load balancer of the multi-node tests (t/api/cluster/);
# tzdata the zone files src/core/tz.c reads (/usr/share/zoneinfo); gdb the
# debugger the crash tests stop revopsd with at an exact point.
set -euo pipefail
pkgs=(build-essential cmake pkg-config python3
      libjansson-dev libsqlite3-dev libssl-dev libcmocka-dev
      libcurl4-openssl-dev libpq-dev postgresql-15 libxml2-dev libxmlsec1-dev zlib1g-dev
      xmlsec1 libxml2-utils openssl sqlite3 curl jq iproute2 nodejs npm
      clang-format haproxy tzdata gdb)
if [ "${1:-}" = "--bench" ]; then pkgs+=(wrk nginx-light); fi
# make fuzz: clang and its libFuzzer + sanitizer runtimes.
if [ "${1:-}" = "--fuzz" ]; then pkgs+=(clang libclang-rt-14-dev); fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# nodejs/npm may come from outside Debian on a prepared machine: accept any.
if command -v node >/dev/null && command -v npm >/dev/null; then
  kept=(); for p in "${missing[@]}"; do case "$p" in nodejs|npm) ;; *) kept+=("$p");; esac; done
  missing=("${kept[@]}")
fi
[ ${#missing[@]} -eq 0 ] && exit 0
echo "install-deps: installing ${missing[*]}" >&2
sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
