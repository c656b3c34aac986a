"""Runs of a script in tests/vllm under a vLLM root, in a subprocess.

Each run imports one vLLM in a fresh interpreter (the test process may already hold another), with the
root first on ``sys.path``; it prints one JSON document on its last line.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from patchspec.verbs import writing

HERE = Path(__file__).resolve().parent
SPEC = HERE.parents[1] / "specs" / "pipeline-parallel.yaml"
READS = HERE.parent / "e2e" / "reads"
# The releases the real-code tests run on; PATCHSPEC_VLLM_RELEASES=0.24.0,0.27.0 runs them on others (each
# needs a profile of pipeline-parallel that admits it).
RELEASES = os.environ.get("PATCHSPEC_VLLM_RELEASES", "0.26.0,0.30.0").split(",")
RUN_TIMEOUT_S = 600


def release_roots(release: Path, base: Path) -> tuple[Path, Path]:
    """Writable ``(pristine, patched)`` copies of a cached release root under ``base``; the patched one
    has the spec's vLLM targets applied, with the profile that admits the release."""
    ignore = shutil.ignore_patterns(".complete")
    pristine = shutil.copytree(release, base / "pristine", ignore=ignore)
    patched = shutil.copytree(pristine, base / "patched")
    writing.apply(str(SPEC), "auto", str(patched), only={"vllm"})
    return pristine, patched


def start(root: Path, script: str, *args: str, env: dict | None = None) -> subprocess.Popen:
    """Run ``tests/vllm/<script>`` under ``root`` (started, not awaited: callers run pairs side by side).

    ``tests/e2e/reads`` is on the path too: with ``PATCHSPEC_E2E_READS`` set in ``env`` its
    sitecustomize records every tensor safetensors hands out."""
    path = os.pathsep.join([str(root), str(READS)])
    full = {**os.environ, "PYTHONPATH": path, "PYTHONHASHSEED": "0", "HF_HUB_OFFLINE": "1",
            "VLLM_LOGGING_LEVEL": "WARNING", **(env or {})}
    return subprocess.Popen([sys.executable, str(HERE / script), *args], env=full, cwd=str(HERE),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_stages(root: Path, checkpoint: Path, size: int, reads: Path, env: dict | None = None,
                 iterator: str = "safetensors") -> list:
    """The ``size`` stages of ``loader_run.py`` on one gloo world; stage k notes its reads in reads/k."""
    port = str(free_port())
    procs = []
    for rank in range(size):
        notes = reads / str(rank)
        notes.mkdir(parents=True)
        procs.append(start(root, "loader_run.py", str(checkpoint), str(rank), str(size), port, iterator,
                           env={**(env or {}), "PATCHSPEC_E2E_READS": str(notes)}))
    return procs


def result(proc: subprocess.Popen):
    """The JSON document a run printed last; its stderr tail when it failed."""
    out, err = proc.communicate(timeout=RUN_TIMEOUT_S)
    if proc.returncode != 0:
        raise AssertionError(f"{proc.args[1]} exited {proc.returncode}:\n{err[-4000:]}")
    return json.loads(out.strip().splitlines()[-1])
