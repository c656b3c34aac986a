"""Runs of a script in tests/vllm under a vLLM root, in a subprocess.

Each run imports one vLLM in a fresh interpreter (the test process may already hold another), with the
root first on ``sys.path``; it prints one JSON document on its last line.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
READS = HERE.parent / "e2e" / "reads"
RELEASES = ["0.26.0", "0.30.0"]
RUN_TIMEOUT_S = 600


def start(root: Path, script: str, *args: str, env: dict | None = None) -> subprocess.Popen:
    """Run ``tests/vllm/<script>`` under ``root`` (started, not awaited: callers run pairs side by side).

    ``tests/e2e/reads`` is on the path too: with ``PATCHSPEC_E2E_READS`` set in ``env`` its
    sitecustomize records every tensor safetensors hands out."""
    path = os.pathsep.join([str(root), str(READS)])
    full = {**os.environ, "PYTHONPATH": path, "PYTHONHASHSEED": "0", "HF_HUB_OFFLINE": "1",
            "VLLM_LOGGING_LEVEL": "WARNING", **(env or {})}
    return subprocess.Popen([sys.executable, str(HERE / script), *args], env=full, cwd=str(HERE),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def result(proc: subprocess.Popen):
    """The JSON document a run printed last; its stderr tail when it failed."""
    out, err = proc.communicate(timeout=RUN_TIMEOUT_S)
    if proc.returncode != 0:
        raise AssertionError(f"{proc.args[1]} exited {proc.returncode}:\n{err[-4000:]}")
    return json.loads(out.strip().splitlines()[-1])
