"""Composition with a spec that reorders the prompts: anchored before pipeline-parallel's early return in
``sample_tokens`` it runs on every stage, and size 2 still samples what size 1 does; anchored after it,
it runs on the last stage only, the stages fall out of step, and the rows digest refuses the step.
"""
from __future__ import annotations

import shutil

import pytest
from hpu_stages import Pipeline, generate, outputs_of

from conftest import REPO, SPEC, build_root
from patchspec.verbs import writing

REORDER = REPO / "tests" / "fixtures" / "reorder_spec"
# three prompts at once, so that reversing them changes the prefill chunks (two prompts per chunk)
PROMPTS = {"a": [5, 6, 7, 8, 9], "b": [11, 12], "c": [3, 1, 4, 1, 5, 9, 2], "d": [60, 61, 62]}


def _root(hpu_roots, tmp_path, after_return=False):
    spec_dir = shutil.copytree(REORDER, tmp_path / "reorder_spec")
    spec = spec_dir / "reorder.yaml"
    if after_return:  # the same policy, placed where only the last stage runs it
        spec.write_text(spec.read_text().replace("insert_after:", "insert_before:").replace(
            '"self._ensure_decodes_first(scheduler_output)"', '"if num_prefills > 0: ..."'))
    root = build_root(tmp_path / "root", hpu_roots[0])
    writing.apply(str(SPEC), "v0.30.0", str(root))
    writing.apply(str(spec), "v0.30.0", str(root))
    return root


@pytest.fixture(scope="module")
def reference(hpu_roots):
    with Pipeline(hpu_roots[0], 1) as pipeline:
        return outputs_of(generate(pipeline, PROMPTS), 0)


def test_reordering_before_the_early_return_runs_on_every_stage(hpu_roots, tmp_path, reference):
    with Pipeline(_root(hpu_roots, tmp_path), 2) as pipeline:
        steps = generate(pipeline, PROMPTS)
    for step in steps[:-1]:
        for report in step.reports.values():
            assert report.calls[:2] == ["_ensure_decodes_first", "reverse_prompts"]
    assert outputs_of(steps, 1) == reference


def test_reordering_after_the_early_return_is_refused_by_the_rows_digest(hpu_roots, tmp_path):
    """There the last stage alone changes the persistent batch order, so it would read stage 0's rows as
    other requests' with the same padded shapes; the rows digest in every forward's header (wire version 3:
    the step's requests in row order and their token counts) makes the last stage refuse the step, naming
    the rows, instead of answering with mixed-up requests."""
    refused = r"stage 1 failed:(.|\n)*PipelineDesyncError: pipeline transfer: rows "
    with pytest.raises(RuntimeError, match=refused), \
            Pipeline(_root(hpu_roots, tmp_path, after_return=True), 2) as pipeline:
        generate(pipeline, PROMPTS)
