"""Several specs on one root and one file: any order of apply and unapply; edits at one place stack in
the specs' order."""
from __future__ import annotations

import itertools

import pytest

from patchspec.errors import PatchspecError
from patchspec.verbs import reading, writing
from tests.verbs.test_apply import DEMO, FIXTURES, tree

SECOND = str(FIXTURES / "second.yaml")
STACKED = str(FIXTURES / "stacked.yaml")


@pytest.fixture
def root(vllm_release, copy_root):
    return copy_root(vllm_release("0.30.0"))


@pytest.mark.parametrize("apply_order, unapply_order",
                         list(itertools.product(itertools.permutations([DEMO, SECOND]), repeat=2)))
def test_any_order_round_trip(root, apply_order, unapply_order):
    before = tree(root)
    for spec in apply_order:
        assert writing.apply(spec, "v0.30.0", str(root)).changed
    text = (root / "vllm/v1/core/sched/scheduler.py").read_text()
    assert "# patchspec: demo" in text and "# patchspec: second" in text
    compile(text, "scheduler.py", "exec")
    both = tree(root)
    assert reading.check(DEMO, "v0.30.0", str(root)).code == 0
    assert reading.check(SECOND, "v0.30.0", str(root)).code == 0
    first, last = unapply_order
    writing.unapply(first, str(root))
    remaining = (root / "vllm/v1/core/sched/scheduler.py").read_text()
    gone = "demo" if first == DEMO else "second"
    kept = "second" if first == DEMO else "demo"
    assert f"# patchspec: {gone}" not in remaining and f"# patchspec: {kept}" in remaining
    assert reading.check(last, "v0.30.0", str(root)).code == 0
    writing.unapply(last, str(root))
    assert tree(root) == before
    assert both != before


def test_the_patched_text_does_not_depend_on_apply_order(vllm_release, copy_root, tmp_path):
    texts = []
    for order in ([DEMO, SECOND], [SECOND, DEMO]):
        root = copy_root(vllm_release("0.30.0"))
        for spec in order:
            writing.apply(spec, "v0.30.0", str(root))
        texts.append((root / "vllm/v1/core/sched/scheduler.py").read_text())
        writing.unapply(DEMO, str(root))
        writing.unapply(SECOND, str(root))
    assert texts[0] == texts[1]


def test_shared_snippet_files_stay_until_the_last_spec_goes(root):
    writing.apply(DEMO, "v0.30.0", str(root))
    writing.apply(SECOND, "v0.30.0", str(root))
    writing.unapply(DEMO, str(root))
    assert (root / "_patchspec_runtime/demo_snips/__init__.py").is_file()
    writing.unapply(SECOND, str(root))
    assert not (root / "_patchspec_runtime").exists()


def test_guards_and_wraps_at_one_place_stack_in_order(root):
    before = tree(root)
    writing.apply(DEMO, "v0.30.0", str(root))
    alone = tree(root)
    writing.apply(STACKED, "v0.30.0", str(root))
    text = (root / "vllm/v1/core/sched/scheduler.py").read_text()
    # stacked has order -1: its guard runs first and its wrapper is innermost (nearest the def)
    assert ("    @_demo.passthrough  # patchspec: demo\n    @_stacked.passthrough  # patchspec: stacked\n"
            "    def schedule(self,") in text
    guards = [line.strip() for line in text.splitlines() if "stop(self, req_index)" in line]
    assert guards == ["if _stacked.stop(self, req_index): break  # patchspec: stacked",
                      "if _demo.stop(self, req_index): break  # patchspec: demo"]
    writing.unapply(STACKED, str(root))
    assert tree(root) == alone
    writing.unapply(DEMO, str(root))
    assert tree(root) == before


def test_unapply_of_a_spec_not_applied(root):
    writing.apply(DEMO, "v0.30.0", str(root))
    with pytest.raises(PatchspecError, match="spec second is not applied"):
        writing.unapply(SECOND, str(root))
