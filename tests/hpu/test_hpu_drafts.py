"""Speculative decoding at pipeline size 2 on the HPU runner: the draft model on the last stage only.

vllm-gaudi makes its drafter on every rank and ``load_model`` loads the draft model wherever one exists, so
stock stage 0 loads an MTP draft it can never run (no LM head, no last hidden states). Patched, a non-last
stage drops the drafter before ``load_model``; the last stage, and size 1, load it as before. The fixture
runner (vllm-gaudi's names and statements, our code) runs as real stage processes over gloo.
"""
from __future__ import annotations

import pytest
from hpu_stages import Pipeline

MTP = {"method": "mtp", "num_speculative_tokens": 1}
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
