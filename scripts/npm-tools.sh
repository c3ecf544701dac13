#!/usr/bin/env bash
# Installs the pinned npm test tools (tools/npm/package-lock.json) once.
set -euo pipefail
cd "$(dirname "$0")/../tools/npm"
stamp=node_modules/.revops-stamp
if [ -f "$stamp" ] && [ "$stamp" -nt package-lock.json ]; then exit 0; fi
npm ci --no-audit --no-fund --loglevel=error >/dev/null
touch "$stamp"
