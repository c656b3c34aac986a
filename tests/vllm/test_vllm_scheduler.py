"""The scheduler targets on vLLM's real ``Scheduler`` (CPU): microbatches at size 2, nothing changed at
size 1 or under async scheduling. 0.26.0 and 0.30.0 take the spec's own form; from 0.31.0 the profiles
override the admission cap (the WAITING loop became ``while token_budget > 0:`` over
``kv_holding_waiting`` and ``waiting``): the default run adds the newest of those, 0.33.0, and
``PATCHSPEC_VLLM_RELEASES=0.31.0,0.32.0`` runs the others."""
from __future__ import annotations

import json

import pytest
from packaging.version import Version
from vllm_runs import RELEASES, result, start

SCENARIOS = [{"pp": 1, "async": False, "max_seqs": 16}, {"pp": 2, "async": False, "max_seqs": 16},
             {"pp": 2, "async": True, "max_seqs": 16}, {"pp": 2, "async": False, "max_seqs": 4}]
# Eight requests of 2,000 prompt tokens and 16 new tokens each: long enough that a whole token list
# sent again per step shows.
LONG = [[2000, 16]] * 8
SCENARIOS += [{"pp": 1, "async": False, "max_seqs": 8, "requests": LONG},
              {"pp": 2, "async": False, "max_seqs": 8, "requests": LONG}]
# Three n-gram drafts per step and a KV cache of 8 blocks of 16 tokens for six requests of 22 to 68 prompt
# tokens: some are preempted while a step of theirs is out.
PREEMPTING = [[44, 24], [68, 24], [46, 24], [22, 24], [36, 24], [52, 24]]
SCENARIOS += [{"pp": 2, "async": False, "max_seqs": 8, "drafts": 3, "blocks": 8, "requests": PREEMPTING}]
PP1, PP2, PP2_ASYNC, PP2_FOUR_SEQS, LONG_PP1, LONG_PP2, PP2_DRAFTS_PREEMPTING = range(7)
# max_num_active_seqs (vLLM 0.31 on): RUNNING admits at most 4 of the 16 runner slots.
ACTIVE_SCENARIO = {"pp": 2, "async": False, "max_seqs": 16, "max_active": 4}
PP2_FOUR_ACTIVE = len(SCENARIOS)
NEWEST = "0.33.0"
# A tiny text-only model: the scheduler reads its config, never its weights.
CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
          "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 4,
          "num_hidden_layers": 4, "vocab_size": 1000, "max_position_embeddings": 4096,
          "torch_dtype": "float32", "rms_norm_eps": 1e-6}


@pytest.fixture(scope="module", params=RELEASES + [NEWEST] * (NEWEST not in RELEASES))
def runs(request, vllm_roots, tmp_path_factory):
    """``(stock, patched)`` results of every scenario on one release, both runs side by side."""
    model = tmp_path_factory.mktemp("model")
    (model / "config.json").write_text(json.dumps(CONFIG))
    pristine, patched = vllm_roots(request.param)
    scenarios = SCENARIOS + [ACTIVE_SCENARIO] * has_active_seqs(request.param)
    procs = [start(root, "scheduler_run.py", str(model), json.dumps(scenarios)) for root in (pristine, patched)]
    return tuple(result(p) for p in procs)


def has_active_seqs(release: str) -> bool:
    return Version(release) >= Version("0.31.0")


def counts(run: dict) -> list[int]:
    return [len(step) for step in run["steps"]]


def test_stock_size_2_takes_turns(runs):
    stock, _ = runs
    assert counts(stock[PP2])[:8] == [6, 0, 6, 0, 6, 0, 6, 0]


def test_size_2_schedules_half_the_requests_per_step_from_the_first(runs):
    _, patched = runs
    # Admission from WAITING takes the same share as the RUNNING loop: the first step admits three, the
    # second the other three while the first microbatch is in flight; no step of the fill is a bubble.
    assert counts(patched[PP2])[:8] == [3, 3, 3, 3, 3, 3, 3, 3]
    assert max(counts(patched[PP2])) == 3


def test_max_num_seqs_bounds_all_microbatches_together(runs):
    _, patched = runs
    run = patched[PP2_FOUR_SEQS]
    assert max(run["running"]) == 4
    # Four requests may run at size 2: microbatches of two, from the first step.
    assert counts(run)[:6] == [2, 2, 2, 2, 2, 2]
    assert max(counts(run)) == 2
    assert run["tokens"] == patched[PP2]["tokens"]


def test_max_num_active_seqs_bounds_all_microbatches_together(runs):
    _, patched = runs
    if len(patched) <= PP2_FOUR_ACTIVE:
        pytest.skip("no max_num_active_seqs before vLLM 0.31")
    run = patched[PP2_FOUR_ACTIVE]
    # The share is of the 4 requests RUNNING may hold, not of the 16 runner slots (3, then 1).
    assert max(run["running"]) == 4
    assert counts(run)[:6] == [2, 2, 2, 2, 2, 2]
    assert run["tokens"] == patched[PP2]["tokens"]


def test_no_request_in_two_in_flight_steps(runs):
    stock, patched = runs
    assert stock[PP2]["in_flight_twice"] == []
    assert patched[PP2]["in_flight_twice"] == []


def test_every_request_gets_the_same_tokens_as_at_size_1(runs):
    stock, patched = runs
    expected = stock[PP1]["tokens"]
    assert sorted(expected) == [f"r{i}" for i in range(6)]
    assert patched[PP2]["tokens"] == expected
    assert stock[PP2]["tokens"] == expected


@pytest.mark.parametrize("scenario", [PP1, PP2_ASYNC], ids=["size-1", "size-2-async"])
def test_output_unchanged_at_size_1_and_under_async_scheduling(runs, scenario):
    stock, patched = runs
    assert len(stock[scenario]["outputs"]) > 5
    assert patched[scenario]["outputs"] == stock[scenario]["outputs"]


def test_size_2_sends_each_request_s_token_ids_once_not_every_step(runs):
    """Under the microbatch cap the microbatches take turns, so a request is never in the step just before
    its own, and vLLM's ``prev_step_scheduled_req_ids`` made its cached data carry its whole token list
    (``all_token_ids``) every step, for workers that hold it already (224,952 token ids in this run).
    Now a running request's list goes at most as often as at size 1."""
    stock, patched = runs
    pp1, pp2 = patched[LONG_PP1], patched[LONG_PP2]
    assert pp2["tokens"] == pp1["tokens"] == stock[LONG_PP2]["tokens"]
    assert all(len(t) == 16 for t in pp2["tokens"].values())
    assert max(counts(pp2)) == 4  # two microbatches of four
    assert pp1["resent"] == stock[LONG_PP1]["resent"]  # size 1 as stock
    assert sum(pp2["resent"]) <= sum(pp1["resent"]), (pp2["resent"], pp1["resent"])


def test_drafts_of_a_step_out_when_its_request_was_preempted_are_not_scheduled(runs):
    """Without async scheduling at size 2 each step's drafts reach the scheduler right after its output. A
    request preempted while that step was out gets its tokens all the same (vLLM's stale output); handed the
    step's drafts too, it was scheduled again, its re-prefill still out, with as many drafts as tokens (the
    draft model's proposer then read past its indexes: an IndexError on ``token_indices_to_sample`` in the CPU
        engine). The drafts go only to requests the output left caught up. On vLLM 0.26 a request out with its
    drafts counted computed was also scheduled again with a negative count (0.28 clamps it at 0): the spec
    clamps it on every release."""
    _, patched = runs
    run = patched[PP2_DRAFTS_PREEMPTING]
    assert "failed" not in run, run["failed"]
    assert run["stale_drafts"] > 0  # the scenario reaches it
    assert run["overdrafted"] == [] and run["in_flight_twice"] == []
    assert 0 < run["accepted_tokens"] < run["draft_tokens"]
    assert sorted(map(len, run["tokens"].values())) == [24] * len(PREEMPTING)
