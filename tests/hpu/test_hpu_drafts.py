"""Speculative decoding at pipeline size 2 on the HPU runner: the draft model on the last stage only, and
each step's drafts in that step's output.

vllm-gaudi makes its drafter on every rank and ``load_model`` loads the draft model wherever one exists, so
stock stage 0 loads an MTP draft it can never run (no LM head, no last hidden states). Patched, a non-last
stage drops the drafter before ``load_model``; the last stage, and size 1, load it as before. Without async
scheduling the engine keeps 2 steps in flight and, stock, takes the drafts after scheduling the next step,
before the step they continue has come back; patched, the last stage's ``sample_tokens`` puts them in the
step's output for the engine to take after it (``speculative.take_drafts_of_output``). The fixture runner
(vllm-gaudi's names and statements, our code) runs as real stage processes over gloo.
"""
from __future__ import annotations

import pytest
from hpu_stages import Pipeline, generate

MTP = {"method": "mtp", "num_speculative_tokens": 1}
MTP2 = {"method": "mtp", "num_speculative_tokens": 2}
PROMPTS = {"a": [3, 1, 4, 1, 5], "b": [9, 2, 6], "c": [5, 3, 5, 8]}
LOADED = "mtp draft beside TinyPipelineModel"


def test_only_the_last_stage_loads_the_draft_at_size_2(hpu_roots):
    with Pipeline(hpu_roots[1], 2, speculative=MTP) as pipeline:
        loaded = pipeline.run("load")
    assert loaded[0].output == {"draft": None}
    assert loaded[1].output == {"draft": LOADED}


@pytest.mark.parametrize("root", [0, 1], ids=["stock", "patched"])
def test_size_1_loads_the_draft(hpu_roots, root):
    with Pipeline(hpu_roots[root], 1, speculative=MTP) as pipeline:
        assert pipeline.run("load")[0].output == {"draft": LOADED}


def test_the_last_stage_s_output_carries_the_drafts_of_its_step_at_size_2(hpu_roots):
    """Every step the last stage samples, its output carries the drafts proposed from those tokens (the
    fixture's drafter proposes each sampled token's successors); stage 0's output carries none. Stock left
    them for the engine's ``take_draft_token_ids`` after the next step was scheduled."""
    with Pipeline(hpu_roots[1], 2, speculative=MTP2) as pipeline:
        pipeline.run("load")
        steps = generate(pipeline, PROMPTS, max_tokens=3, microbatches=2)
    sampling = [s for s in steps if s.reports[1].output]
    assert len(sampling) >= 3
    for step in sampling:
        sampled = step.reports[1].output
        assert step.reports[1].drafts == {r: [t + 1, t + 2] for r, (t,) in sampled.items()}
    assert all(s.reports[0].drafts is None for s in steps)


@pytest.mark.parametrize("root", [0, 1], ids=["stock", "patched"])
def test_size_1_leaves_the_drafts_to_take_draft_token_ids(hpu_roots, root):
    with Pipeline(hpu_roots[root], 1, speculative=MTP2) as pipeline:
        pipeline.run("load")
        steps = generate(pipeline, PROMPTS, max_tokens=3)
    assert any(s.reports[0].output for s in steps)
    assert all(s.reports[0].drafts is None for s in steps)
