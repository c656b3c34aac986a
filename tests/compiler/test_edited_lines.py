"""Each transform's own lines in the patched file (``plan.edited_lines``), which the proof looks for its
code on: never the same text elsewhere in the target (h11 0.15.0: a replacement whose text matched another
line was called live at that line), and found again when another spec's edits move them."""
from __future__ import annotations

from patchspec.compiler import plan as planner
from tests.compiler.helpers import FILE
from tests.compiler.kinds.cases import d, spec

SOURCE = d("""
           def f(data):
               a = 1
               b = 2
               c = 3
               return a + b + c
           """)


def _lines(one, texts=None):
    plan = planner.resolve([one], {FILE: SOURCE}.get, lambda pkg: True)
    assert not plan.errors, [r.detail for r in plan.errors]
    patched = planner.emit(plan, [one])[FILE]
    written = planner.edited_lines(plan, one, {FILE: (texts or {}).get(FILE, patched)})
    return [sorted(written[id(r)]) for r in plan.resolved], patched


def test_a_replacement_that_matches_another_line_is_tied_to_its_own():
    lines, patched = _lines(spec("f", {"replace": {"pattern": "b = 2", "by": "a = 1"}},
                                 {"insert_after": {"anchor": "c = 3", "code": "a = 1"}}))
    assert patched.splitlines()[1:5] == ["    a = 1", "    a = 1  # patchspec: fix", "    c = 3",
                                         "    a = 1  # patchspec: fix"]
    assert lines == [[3], [5]]


def test_lines_found_again_in_a_file_another_spec_also_patched():
    one = spec("f", {"replace": {"pattern": "c = 3", "by": "c = 4"}})
    other = spec("f", {"insert_before": {"anchor": "a = 1", "code": "data = data or 0"}}, name="other")
    plan = planner.resolve([one, other], {FILE: SOURCE}.get, lambda pkg: True)
    both = planner.emit(plan, [one, other])[FILE]
    assert both.splitlines()[4] == "    c = 4  # patchspec: fix"
    assert _lines(one, {FILE: both})[0] == [[5]]
