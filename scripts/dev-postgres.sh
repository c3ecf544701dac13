#!/usr/bin/env bash
# Starts a throw-away PostgreSQL 15 on a free loopback port (a temporary
# directory, fsync off: for trying revopsd out, not for data you keep) and
# prints the --database URL and the command that removes it again.
#
#   scripts/dev-postgres.sh
#   ./build/revopsd --demo --database 'postgres://revops@127.0.0.1:PORT/postgres'
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$("$here/pg-test-cluster.sh" start)
url=${out% *}
dir=${out##* }
echo "$url"
echo "stop with: $here/pg-test-cluster.sh stop $dir" >&2
