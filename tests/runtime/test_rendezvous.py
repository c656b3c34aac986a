"""A setting the start-up could hang on is compared through the rendezvous store before it can (issue 30,
item 1): two real processes, torch's store as ``init_process_group`` makes it."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.coordinator.test_coordinator import _free_port

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RUN_S = 300.0  # a safety net: every case ends on an event long before


def _pair(world_checks: tuple[str, str], hang: str) -> list[subprocess.CompletedProcess]:
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, str(HERE / "rendezvous_run.py"), str(rank), str(port),
                               world_checks[rank], hang], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for rank in (0, 1)]
    try:
        return [(p, *p.communicate(timeout=RUN_S)) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


@pytest.mark.parametrize("late", ["0", "1"])
def test_a_different_world_check_stops_both_ranks_while_the_start_up_hangs_on_it(late):
    """``VLLM_HPU_PP_HCCL_WORLD_CHECK=1`` on one node only: the start-up hangs (one node all-reduces over
    HCCL, the other over gloo). Each rank stops with the named refusal naming the setting and both values;
    before, nothing compared it until the handshake after that hang."""
    world_checks = ("0", "1") if late == "1" else ("1", "0")
    results = _pair(world_checks, hang="1")
    for rank, (proc, out, err) in enumerate(results):
        assert "started" not in out
        assert proc.returncode != 0
        here, there = ("False", "True") if world_checks == ("0", "1") else ("True", "False")
        assert (f"rank 1 refused to start: PipelineHandshakeError: pipeline start-up: rank 1 and rank 0 "
                f"differ: VLLM_HPU_PP_HCCL_WORLD_CHECK {there} here, {here} there; give every node the same "
                "VLLM_HPU_PP_HCCL_WORLD_CHECK") in err, err[-2000:]
        assert f"pipeline start-up on rank {rank} ended" in err


def test_the_same_settings_start():
    results = _pair(("0", "0"), hang="0")
    assert [(proc.returncode, out) for proc, out, _ in results] == [(0, "started\n"), (0, "started\n")]
