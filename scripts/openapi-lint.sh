#!/usr/bin/env bash
# Lints docs/openapi.json with the pinned @redocly/cli (tools/npm).
set -euo pipefail
cd "$(dirname "$0")/../tools/npm"
[ -x node_modules/.bin/redocly ] || { echo "run scripts/npm-tools.sh first" >&2; exit 1; }
REDOCLY_TELEMETRY=off node_modules/.bin/redocly lint --config redocly.yaml ../../docs/openapi.json
