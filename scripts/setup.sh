#!/usr/bin/env bash
# One venv for patchspec, its tests and benchmarks: torch (CPU, from this machine's disk), patchspec
# itself (editable) and vLLM's pure-Python requirements for the tests that run the real scheduler and
# weight loader. Idempotent: a second run only checks. Prints the venv's python on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${PATCHSPEC_CACHE:-$HOME/.cache/patchspec}
VENV=${PATCHSPEC_VENV:-$CACHE/venv}
PYTHON=${PYTHON:-python3}
STAMP=$VENV/.patchspec-setup
# The checkout's path is part of the stamp: the editable install must point at this checkout, not at
# another clone that set the venv up before.
WANT=$( { pwd; cat pyproject.toml; cat scripts/vllm-test-requirements.txt 2>/dev/null || true; } | sha256sum | cut -c1-16)

if [[ -f $STAMP && $(cat "$STAMP") == "$WANT" ]]; then
    echo "$VENV/bin/python"
    exit 0
fi
mkdir -p "$CACHE"
[[ -x $VENV/bin/python ]] || "$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
"${PIP[@]}" "torch==2.13.0"
"${PIP[@]}" -e ".[test]"
if [[ -f scripts/vllm-test-requirements.txt ]]; then
    "${PIP[@]}" --no-deps -r scripts/vllm-test-requirements.txt  # see the file: no triton
fi
echo "$WANT" > "$STAMP"
echo "$VENV/bin/python"
