#!/usr/bin/env bash
# The main job: set up (once), then show the pipeline-parallel spec at work on vLLM 0.30.0 from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(bash scripts/setup.sh | tail -n 1)
exec "$PY" -m patchspec demo "$@"
