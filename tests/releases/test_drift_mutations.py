"""Mutations of a real release file (vLLM 0.30.0's scheduler), each giving its drift class.

The probe spec's v0.30.0 profile holds the fingerprints of the pristine file; every test changes one thing
in a copy and checks the class of every transform, against the recorded fingerprints and against the
pristine copy as baseline.
"""
from __future__ import annotations

import ast
import shutil
from pathlib import Path

import libcst as cst
import pytest

from patchspec.compiler import drift
from patchspec.compiler.fingerprint import Change
from patchspec.releases import report
from tests.releases.test_drift import ALL, PROBE, by_key, small_root

SCHEDULER = "vllm/v1/core/sched/scheduler.py"


@pytest.fixture(scope="module")
def pristine(vllm_release, tmp_path_factory) -> Path:
    return small_root(tmp_path_factory.mktemp("pristine"), vllm_release("0.30.0"))


@pytest.fixture
def mutate(pristine, tmp_path):
    """``mutate(old, new, count=1)``: a copy of the pristine root with ``old`` replaced in the scheduler;
    returns the drift rows by key against the v0.30.0 profile, with the pristine root as baseline."""
    def run(old: str, new: str, count: int = 1) -> dict[str, drift.DriftRow]:
        root = tmp_path / "root"
        shutil.copytree(pristine, root)
        text = (root / SCHEDULER).read_text()
        assert text.count(old) == count, f"{old!r} occurs {text.count(old)} times"
        (root / SCHEDULER).write_text(text.replace(old, new))
        result = report.drift(PROBE, str(root), baseline=str(pristine), use_cache=False)
        assert result.release == "v0.30.0"
        return by_key(result.rows)
    return run


def classes(rows) -> dict[str, str]:
    return {key: row.drift for key, row in rows.items()}


UNCHANGED = dict.fromkeys(ALL, "unchanged")


def test_rename_the_target(mutate):
    rows = mutate("    def _try_promote_blocked_waiting_request(self", "    def _promote_blocked(self")
    assert classes(rows) == {**UNCHANGED, "promote-blocked#0": "target-missing"}
    best = rows["promote-blocked#0"].candidates[0]
    assert (best.qualname, best.line, best.anchors) == ("Scheduler._promote_blocked", 2962, 1)
    assert best.similarity > 0.95  # the same body under another name


def test_duplicate_an_anchor(mutate):
    anchor = "        input_budget = self.scheduler_config.max_num_batched_tokens\n"
    rows = mutate(anchor, anchor * 2)
    schedule = {"schedule#0": "changed", "schedule#1": "anchor-ambiguous", "schedule#2": "changed",
                "schedule#3": "changed"}
    assert classes(rows) == {**UNCHANGED, **schedule}
    assert rows["schedule#1"].lines == [584, 585]
    assert rows["schedule#0"].changes == [Change("insert", 584, 584)]  # one of the two


def test_delete_an_anchor(mutate):
    rows = mutate("            step_skipped_waiting = create_request_queue(self.policy)\n", "")
    assert classes(rows) == {**UNCHANGED, "schedule#0": "changed", "schedule#1": "changed",
                             "schedule#2": "anchor-missing", "schedule#3": "changed"}
    assert rows["schedule#0"].changes == [Change("delete", 857, 857)]  # before the next statement
    assert rows["schedule#2"].baseline_line == 856


def test_change_a_statement_next_to_an_anchor(mutate):
    anchor = "            self._update_waiting_for_remote_kv(request)\n"
    rows = mutate(anchor + "            if request.num_preemptions:",
                  anchor + "            if request.num_preemptions > 1:")
    assert classes(rows) == {**UNCHANGED, "promote-blocked#0": "changed"}
    assert rows["promote-blocked#0"].changes == [Change("replace", 2973, 2973)]
    assert rows["promote-blocked#0"].line == 2972


def test_comments_and_docstrings_alone_are_unchanged(mutate):
    rows = mutate('        """Returns (num_running_reqs, num_waiting_reqs)."""',
                  '        """The running and waiting counts."""  # reworded\n        # and commented')
    assert classes(rows) == UNCHANGED
    assert rows["request-counts#0"].changes == []


QUOTES = {"'": '"', '"': "'"}


class Relayout(cst.CSTTransformer):
    """Only layout: two-space indents, no comments or blank lines, swapped quotes (f-strings too),
    parenthesized returns, wide operators. The module's ``ast`` stays the same."""

    def leave_Module(self, original, updated):
        return updated.with_changes(default_indent="  ")

    def leave_IndentedBlock(self, original, updated):
        return updated.with_changes(indent=None, header=cst.TrailingWhitespace())

    def leave_TrailingWhitespace(self, original, updated):
        return cst.TrailingWhitespace()

    def leave_EmptyLine(self, original, updated):
        return cst.RemoveFromParent()

    def leave_SimpleString(self, original, updated):
        value = updated.value
        if value[:1] in QUOTES and value[:3] not in ("'''", '"""') and not set(value[1:-1]) & set("'\"\\"):
            return updated.with_changes(value=QUOTES[value[0]] + value[1:-1] + QUOTES[value[0]])
        return updated

    def leave_FormattedString(self, original, updated):
        code = cst.Module(body=[]).code_for_node(updated)
        inner = code[len(updated.start):-len(updated.end)]
        if updated.end in QUOTES and not set(inner) & set("'\"\\"):
            return updated.with_changes(start=updated.start[:-1] + QUOTES[updated.end], end=QUOTES[updated.end])
        return updated

    def leave_Return(self, original, updated):
        if updated.value is not None and not updated.value.lpar:
            return updated.with_changes(value=updated.value.with_changes(lpar=[cst.LeftParen()],
                                                                         rpar=[cst.RightParen()]))
        return updated

    def leave_BinaryOperation(self, original, updated):
        op = updated.operator
        return updated.with_changes(operator=op.with_changes(whitespace_before=cst.SimpleWhitespace("  "),
                                                             whitespace_after=cst.SimpleWhitespace("  ")))


def test_reformatting_the_whole_file_alone_is_unchanged(pristine, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(pristine, root)
    for rel in ("vllm/v1/core/sched/scheduler.py", "vllm/model_executor/model_loader/weight_utils.py",
                "vllm/sequence.py"):
        old = (root / rel).read_text()
        new = cst.parse_module(old).visit(Relayout()).code
        assert new != old and len(new.splitlines()) < len(old.splitlines())
        assert ast.dump(ast.parse(new)) == ast.dump(ast.parse(old))
        (root / rel).write_text(new)
    result = report.drift(PROBE, str(root), baseline=str(pristine), use_cache=False)
    rows = by_key(result.rows)
    assert classes(rows) == UNCHANGED
    assert all(r.changes == [] for r in rows.values())
    assert rows["schedule#0"].line < rows["schedule#0"].baseline_line  # it moved, and is still found
    assert result.code == 0
