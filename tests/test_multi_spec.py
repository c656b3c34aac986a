"""Several specs on one root and one file: any order of apply and unapply, conflicts refused up front."""
from __future__ import annotations

import itertools

import pytest

from patchspec import ops
from patchspec.cli import main
from patchspec.errors import PatchspecError
from tests.test_apply import DEMO, FIXTURES, tree

SECOND = str(FIXTURES / "second.yaml")
CONFLICT = str(FIXTURES / "conflict.yaml")


@pytest.fixture
def root(vllm_release, copy_root):
    return copy_root(vllm_release("0.30.0"))


@pytest.mark.parametrize("apply_order, unapply_order",
                         list(itertools.product(itertools.permutations([DEMO, SECOND]), repeat=2)))
def test_any_order_round_trip(root, apply_order, unapply_order):
    before = tree(root)
    for spec in apply_order:
        assert ops.apply(spec, "v0.30.0", str(root)).changed
    text = (root / "vllm/v1/core/sched/scheduler.py").read_text()
    assert "# patchspec: demo" in text and "# patchspec: second" in text
    compile(text, "scheduler.py", "exec")
    both = tree(root)
    assert ops.check(DEMO, "v0.30.0", str(root)).code == 0
    assert ops.check(SECOND, "v0.30.0", str(root)).code == 0
    first, last = unapply_order
    ops.unapply(first, str(root))
    remaining = (root / "vllm/v1/core/sched/scheduler.py").read_text()
    gone = "demo" if first == DEMO else "second"
    kept = "second" if first == DEMO else "demo"
    assert f"# patchspec: {gone}" not in remaining and f"# patchspec: {kept}" in remaining
    assert ops.check(last, "v0.30.0", str(root)).code == 0
    ops.unapply(last, str(root))
    assert tree(root) == before
    assert both != before


def test_the_patched_text_does_not_depend_on_apply_order(vllm_release, copy_root, tmp_path):
    texts = []
    for order in ([DEMO, SECOND], [SECOND, DEMO]):
        root = copy_root(vllm_release("0.30.0"))
        for spec in order:
            ops.apply(spec, "v0.30.0", str(root))
        texts.append((root / "vllm/v1/core/sched/scheduler.py").read_text())
        ops.unapply(DEMO, str(root))
        ops.unapply(SECOND, str(root))
    assert texts[0] == texts[1]


def test_shared_snippet_files_stay_until_the_last_spec_goes(root):
    ops.apply(DEMO, "v0.30.0", str(root))
    ops.apply(SECOND, "v0.30.0", str(root))
    ops.unapply(DEMO, str(root))
    assert (root / "_patchspec_runtime/demo_snips/__init__.py").is_file()
    ops.unapply(SECOND, str(root))
    assert not (root / "_patchspec_runtime").exists()


def test_conflict_on_one_anchor_is_refused_before_writing(root, capsys):
    ops.apply(DEMO, "v0.30.0", str(root))
    before = tree(root)
    assert main(["apply", CONFLICT, "--release", "v0.30.0", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert "scheduler.py:612: specs conflict (scheduler-loop#0) and demo (scheduler-loop#0) both edit the same anchor" in err
    assert tree(root) == before


def test_unapply_of_a_spec_not_applied(root):
    ops.apply(DEMO, "v0.30.0", str(root))
    with pytest.raises(PatchspecError, match="spec second is not applied"):
        ops.unapply(SECOND, str(root))
