#!/usr/bin/env bash
# The drift watch: does the newest release on the package index still take each spec? For every
# SPEC:DISTRIBUTION pair (default: the shipped specs against vllm) it runs `patchspec drift` on the
# newest release and `patchspec matrix` over every release since PATCHSPEC_WATCH_SINCE, writes both as
# Markdown to $GITHUB_STEP_SUMMARY (or standard output), and exits 1 when a newest release breaks an
# anchor or a binding (drift exit 4), 2 when the watch itself cannot run. The index is pip's: PyPI, or
# PIP_INDEX_URL / PIP_FIND_LINKS (the tests use a directory of wheels).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PATCHSPEC_PYTHON:-python3}
SINCE=${PATCHSPEC_WATCH_SINCE:-0.24.0}
SUMMARY=${GITHUB_STEP_SUMMARY:-/dev/stdout}
PAIRS=("$@")
[[ ${#PAIRS[@]} -gt 0 ]] || PAIRS=(pipeline-parallel:vllm cpu-pipeline-eager:vllm)

status=0
for pair in "${PAIRS[@]}"; do
    spec=${pair%%:*} dist=${pair#*:}
    report=$("$PY" -m patchspec drift "$spec" --pypi "$dist" 2>&1)
    code=$?
    matrix=$("$PY" -m patchspec matrix "$spec" --pypi "$dist" --since "$SINCE" --markdown 2>&1)
    {
        echo "## $spec on the newest $dist (drift exit $code)"
        echo
        echo '```'
        echo "$report"
        echo '```'
        echo
        echo "### every $dist release since $SINCE"
        echo
        echo "$matrix"
        echo
    } >> "$SUMMARY"
    case $code in
        0|1) ;;
        4) echo "drift-watch: $spec: the newest $dist breaks the spec (see the summary)" >&2; [[ $status -eq 2 ]] || status=1 ;;
        *) echo "drift-watch: $spec: drift could not run (exit $code): ${report##*$'\n'}" >&2; status=2 ;;
    esac
done
exit $status
