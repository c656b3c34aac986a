"""The hooks against the real vllm-gaudi sources (the tags v0.24.0, v0.26.0 and v0.27.0rc0, and main standing
in for v0.30.0) and the fixture: the binding check of ``USES``, and the order of the non-last stage's calls in
``sample_tokens``.
"""
from __future__ import annotations

import functools
import math

import call_order
import pytest

from conftest import FIXTURE, SPEC
from patchspec.compiler import bindings
from patchspec.compiler.plan import emit
from patchspec.errors import Exit, PatchspecError
from patchspec.install.root import Root
from patchspec.prepare import compile_spec, prepare
from patchspec.runtime_snippets.pipeline_parallel import buckets, graphs, handshake, runner, sizes, startup, worker
from patchspec.verbs import reading, writing
from patchspec.verdict import binding_problems

RUNNER = "vllm_gaudi/v1/worker/hpu_model_runner.py"
# What the hooks use, per package: vllm_gaudi is checked on the gaudi root, vLLM on the matching release.
USES = [buckets.USES, graphs.USES, handshake.USES, runner.USES, sizes.USES, startup.USES, worker.USES]


def _uses(package: str) -> dict[str, list[str]]:
    """Every module's USES of ``package``'s files, one list per file (several modules use one file)."""
    merged: dict[str, list[str]] = {}
    for uses in USES:
        for rel, names in uses.items():
            if rel.startswith(package + "/"):
                merged.setdefault(rel, []).extend(names)
    return merged


GAUDI_USES = _uses("vllm_gaudi")
VLLM_USES = _uses("vllm")
# (gaudi tag, release profile, vLLM): the tag each profile pairs; v0.30.0 of vllm-gaudi is not published,
# main stands in for it.
REAL = [("v0.24.0", "v0.24.0", "0.24.0"), ("v0.26.0", "v0.26.0", "0.26.0"), ("v0.27.0rc0", "v0.27.0", "0.27.0"),
        ("main", "v0.30.0", "0.30.0")]
SHAPES = [(3, 0, False), (0, 2, False), (1, 2, False), (2, 1, True), (0, 1, True)]


@pytest.fixture(params=["fixture"] + [tag for tag, _, _ in REAL])
def gaudi_root(request, vllm_release):
    """``(root holding only vllm_gaudi, release profile, root of the matching vLLM)``; read-only."""
    if request.param == "fixture":
        return FIXTURE, "v0.30.0", vllm_release("0.30.0")
    tag, release, vllm = next(r for r in REAL if r[0] == request.param)
    return request.getfixturevalue("gaudi_release")(tag), release, vllm_release(vllm)


@functools.lru_cache(maxsize=8)
def _compiled(root, release) -> dict[str, str]:
    """The spec's patched vllm_gaudi files for a root (a parse of 8,000-line files: done once per root)."""
    texts = compile_spec(prepare(str(SPEC), release, str(root), only={"vllm_gaudi"}))
    for rel, text in texts.items():
        compile(text, rel, "exec")
    return texts


def _patched_sample_tokens(root, release):
    return call_order.method(_compiled(root, release)[RUNNER], "HPUModelRunner", "sample_tokens")


def _non_last(method, num_prompts, num_decodes, dp):
    conditions = call_order.batch_conditions(num_prompts, num_decodes, dp)
    loops = {"prefill_data": math.ceil(num_prompts / 2), "dummy_prefill_input_data_batches_across_dp": int(dp)}
    return call_order.non_last_stage_calls(method, conditions, loops)


def test_uses_bind_to_the_release(gaudi_root):
    root, _, vllm = gaudi_root
    assert bindings.problems(GAUDI_USES, bindings.tree_reader(Root.open(root).read_text)) == []
    assert bindings.problems(VLLM_USES, bindings.tree_reader(Root.open(vllm).read_text)) == []
    assert "vllm/v1/outputs.py" in VLLM_USES and "vllm/distributed/kv_transfer/kv_connector/v1/base.py" in VLLM_USES


def test_non_last_path_matches_the_release(gaudi_root):
    """The release's own order equals the fixture's, on which the stage processes record the calls
    (test_hpu_pipeline); nothing before the early return samples, and all preparation precedes it."""
    method = _patched_sample_tokens(*gaudi_root[:2])
    fixture = _patched_sample_tokens(FIXTURE, "v0.30.0")
    assert call_order.calls_before_return(method) == []
    assert set(call_order.PREPARE) <= set(call_order.calls_before_return(method, call_order.PREPARE))
    for shape in SHAPES:
        assert _non_last(method, *shape) == _non_last(fixture, *shape), shape


HOOKED = {RUNNER: ["HPUModelRunner.sample_tokens", "HPUModelRunner._execute_model_generic",
                   "HpuModelAdapter.forward"],
          "vllm_gaudi/v1/worker/hpu_worker.py": ["init_worker_distributed_environment"]}


def test_inserted_code_reads_names_bound_before_it(gaudi_root):
    prepared = prepare(str(SPEC), gaudi_root[1], str(gaudi_root[0]), only={"vllm_gaudi"})
    emit(prepared.plan, [prepared.spec])
    assert set(prepared.plan.rendered) >= {(rel, f) for rel, functions in HOOKED.items() for f in functions}
    assert binding_problems(prepared.spec, prepared.plan, prepared.read) == []


@pytest.mark.parametrize("mutation", ["moved-helper", "renamed-parameter", "lost-attribute", "renamed-local"])
def test_drift_is_caught(mutation, gaudi_root, copy_root):
    """A release that moved a preparation helper after the early return, changed a helper's signature,
    dropped an attribute the snippets use or renamed a local the inserted code passes fails these checks."""
    root, release = copy_root(gaudi_root[0]), gaudi_root[1]
    path = root / RUNNER
    text = path.read_text()
    if mutation == "moved-helper":
        call = "self._ensure_decodes_first(scheduler_output)\n"
        anchor = "finished_sending, finished_recving = set[str](), set[str]()\n"
        text = text.replace(call, "pass\n", 1).replace(anchor, anchor + " " * 8 + call, 1)
        path.write_text(text)
        method = _patched_sample_tokens(root, release)
        fixture = _patched_sample_tokens(FIXTURE, "v0.30.0")
        assert _non_last(method, 1, 1, False) != _non_last(fixture, 1, 1, False)
        return
    if mutation == "renamed-local":
        path.write_text(text.replace("pd_info", "prompt_decode_info"))
        prepared = prepare(str(SPEC), release, str(root), only={"vllm_gaudi"})
        found = [e.detail for e in prepared.plan.errors]
        assert [f.rsplit(": ", 1)[1] for f in found] == ["pd_info"], found
        assert "HPUModelRunner.sample_tokens:" in found[0]
        result = reading.check(str(SPEC), release, str(root), only={"vllm_gaudi"})
        assert result.code == Exit.BROKEN
        with pytest.raises(PatchspecError, match="pd_info"):
            writing.apply(str(SPEC), release, str(root), only={"vllm_gaudi"})
        assert not (root / ".patchspec").exists()
        return
    if mutation == "renamed-parameter":
        text = text.replace("def _configure_lora(self, input, requests, req_ids, is_prompt)",
                            "def _configure_lora(self, input, requests, req_ids)", 1)
        want = "HPUModelRunner._configure_lora"
    else:
        text = text.replace("self.kv_caches", "self.kv_cache_list")
        want = "HPUModelRunner.kv_caches"
    path.write_text(text)
    found = bindings.problems(GAUDI_USES, bindings.tree_reader(Root.open(root).read_text))
    assert len(found) == 1 and want in found[0], found
    _assert_check_reports(root, release, want)


def _assert_check_reports(root, release, what):
    """`patchspec check` calls it drift, and apply refuses before writing anything."""
    result = reading.check(str(SPEC), release, str(root), only={"vllm_gaudi"})
    assert result.code == Exit.BROKEN
    # a snippet binding ("binding: ...") or a name the inserted code reads, unbound in the release
    assert any(what in p.text for p in result.problems) or any(
        row.status.value == "unbound-name" and what in row.detail for row in result.rows), result
    with pytest.raises(PatchspecError, match=what):
        writing.apply(str(SPEC), release, str(root), only={"vllm_gaudi"})
    assert not (root / ".patchspec").exists()


def test_worker_start_up_check_sits_before_the_hccl_world_check(gaudi_root):
    root, release, _ = gaudi_root
    text = _compiled(root, release)["vllm_gaudi/v1/worker/hpu_worker.py"]
    body = text[text.index("def init_worker_distributed_environment"):]
    assert body.index("_pp.checked_world_without_hccl(") < body.index("torch.distributed.all_reduce(")


def _tree(root) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_apply_then_unapply_restores_the_release(gaudi_root, copy_root):
    """Applied: every vllm_gaudi file it touches compiles, ``check`` says applied; unapplied: byte for byte."""
    root, release = copy_root(gaudi_root[0]), gaudi_root[1]
    before = _tree(root)
    result = writing.apply(str(SPEC), release, str(root), only={"vllm_gaudi"})
    assert result.files == ["vllm_gaudi/v1/worker/hpu_input_batch.py", RUNNER, "vllm_gaudi/v1/worker/hpu_worker.py"]
    for rel in result.files:
        compile((root / rel).read_text(), rel, "exec")
    assert reading.check(str(SPEC), release, str(root), only={"vllm_gaudi"}).code == 0
    writing.unapply(str(SPEC), str(root))
    assert _tree(root) == before
