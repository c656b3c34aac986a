"""Readiness as a unit (issue 30): two stage processes that shook hands over gloo on 127.0.0.1 serve their
readiness; the probe command, run for each pod, passes on both while both serve and fails on both, naming
the stage, once either is gone or drains. Events are awaited by their lines, never by time."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def stages():
    """Two serving stages: ``(processes, probe ports)``; both killed at the end."""
    gloo, ports = _free_port(), [_free_port(), _free_port()]
    env = {**os.environ, "PYTHONPATH": str(REPO), "VLLM_PP_PROBE_HOST": "127.0.0.1"}
    procs = [subprocess.Popen([sys.executable, str(HERE / "probe_run.py"), str(rank), str(gloo)],
                              env={**env, "VLLM_PP_PROBE_PORT": str(ports[rank])}, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in (0, 1)]
    try:
        for proc in procs:
            line = proc.stdout.readline()
            assert line == "serving\n", proc.stderr.read()[-3000:]
        yield procs, ports
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def _probe(port: int, peer: int, *extra: str) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-m", "patchspec.runtime_snippets.pipeline_parallel.probe", "--port",
                           str(port), "--peer", f"127.0.0.1:{peer}", *extra], env={**os.environ,
                          "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120)
    return done.returncode, (done.stdout + done.stderr).strip()


def test_the_probe_passes_on_both_pods_while_both_stages_serve_and_fails_on_both_when_one_is_gone(stages):
    procs, (p0, p1) = stages
    assert _probe(p0, p1) == (0, "probe: both stages ready")
    assert _probe(p1, p0) == (0, "probe: both stages ready")
    procs[1].kill()
    procs[1].wait()
    code0, out0 = _probe(p0, p1)
    code1, out1 = _probe(p1, p0)
    assert code0 == code1 == 1
    assert out0.startswith(f"probe: the pipeline stage at 127.0.0.1:{p1} is gone: "), out0
    assert out1.startswith(f"probe: the pipeline stage at 127.0.0.1:{p1} is gone: "), out1


def test_a_drained_stage_fails_the_probe_on_both_pods_and_stays_live(stages):
    _, (p0, p1) = stages
    assert _probe(p0, p1, "--drain") == (1, f"probe: pipeline stage 0 at 127.0.0.1:{p0} is draining")
    assert _probe(p1, p0) == (1, f"probe: pipeline stage 0 at 127.0.0.1:{p0} is draining")
    # the liveness endpoint: a draining stage is not killed for draining
    with urllib.request.urlopen(f"http://127.0.0.1:{p0}/live", timeout=30) as answer:
        assert (answer.status, json.loads(answer.read())) == (200, {"stage": 0, "stages": 2, "state": "draining"})


def test_without_a_port_the_probe_says_what_to_set():
    code, out = _probe_no_port()
    assert (code, out) == (2, "probe: no port: pass --port or set VLLM_PP_PROBE_PORT")


def _probe_no_port() -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k != "VLLM_PP_PROBE_PORT"}
    done = subprocess.run([sys.executable, "-m", "patchspec.runtime_snippets.pipeline_parallel.probe", "--peer",
                           "127.0.0.1:1"], env={**env, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                          timeout=120)
    return done.returncode, (done.stdout + done.stderr).strip()
