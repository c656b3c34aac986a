"""``remove``: a statement taken out, its marker line left in its place."""
from __future__ import annotations

import pytest

from tests.compiler.kinds.cases import d

CASES = [
    pytest.param("cast", {"remove": {"statement": "try:\n    return eval(...)\nexcept Exception:\n    ...\n"}},
                 """
                 def cast(val, typ):
                     if typ == "bool":
                         return True
                     # the fallback
                     try:
                         return eval(typ + val)
                     except Exception:
                         raise TypeError(val)
                     return None
                 """,
                 """
                 def cast(val, typ):
                     if typ == "bool":
                         return True
                     # the fallback
                     # patchspec: fix (removed)
                     return None
                 """, id="remove-leaves-a-marker-line-where-the-statement-was"),
    pytest.param("cast", {"remove": {"statement": "return eval(...)"}},
                 """
                 def cast(val, typ):
                     if typ:
                         return eval(typ)
                     return val
                 """,
                 """
                 def cast(val, typ):
                     if typ:
                         pass  # patchspec: fix (removed)
                     return val
                 """, id="remove-the-only-statement-of-a-block-leaves-a-marked-pass"),
    pytest.param("_OctalPatt", {"remove": {"statement": "_OctalPatt = re.compile(...)"}},
                 r"""
                 import re

                 _OctalPatt = re.compile(r"\\[0-3][0-7][0-7]")
                 _QuotePatt = re.compile(r"[\\].")
                 """,
                 r"""
                 import re

                 # patchspec: fix (removed)
                 _QuotePatt = re.compile(r"[\\].")
                 """, id="remove-a-module-level-assignment-the-target-names"),
    pytest.param("_unquote", {"remove": {"statement": "def _unquote(s): ..."}},
                 """
                 def _unquote(s):
                     return s


                 def other():
                     pass
                 """,
                 """
                 # patchspec: fix (removed)


                 def other():
                     pass
                 """, id="remove-a-module-level-definition-the-target-names"),
    pytest.param("K.LIMIT", {"remove": {"statement": "LIMIT = 3"}},
                 """
                 class K:
                     LIMIT = 3
                     def m(self):
                         return 1
                 """,
                 """
                 class K:
                     # patchspec: fix (removed)
                     def m(self):
                         return 1
                 """, id="remove-a-class-level-assignment-the-target-names-leaves-no-pass"),
]


REFUSALS = [
    pytest.param("f", {"remove": {"statement": "z = 1"}}, "def f():\n    y = 1\n", "missing",
                 id="a-statement-the-function-lacks"),
]


def test_a_removed_assignment_unbinds_its_name():
    from patchspec.compiler.transforms import KINDS

    assert KINDS["remove"].binds({"statement": "label = str(label)"}).unbinds == {"label"}


def test_a_removed_module_level_name_the_file_still_reads_is_refused():
    """A NameError at run time the proof would not see (the module imports; the function is not called)."""
    from patchspec.compiler import plan as planner
    from tests.compiler.helpers import FILE
    from tests.compiler.kinds.cases import spec

    source = d("""
               import re

               _OctalPatt = re.compile(r"[0-7]")


               def _unquote(s):
                   res = []
                   return _OctalPatt.sub("", s)
               """)
    one = spec("_OctalPatt", {"remove": {"statement": "_OctalPatt = re.compile(...)"}})
    plan = planner.resolve([one], {FILE: source}.get, lambda pkg: True)
    planner.emit(plan, [one])
    assert [p.text for p in plan.problems] == ["the patched file still reads _OctalPatt at line 8, which t#0 removes "
                                               "at module level: NameError there; rewrite that line too"]


@pytest.mark.parametrize("insert", [
    pytest.param({"insert_after": {"anchor": "a = g(data)", "code": "data = 1"}}, id="an-insert-after-it"),
    pytest.param({"insert_before": {"anchor": "a = g(data)", "code": "data = 1"}}, id="an-insert-before-it"),
])
def test_a_statement_one_spec_removes_and_edits_next_to_is_one_conflict_naming_both(insert):
    """The output held only the removal, the inserted line lost, while compile and check said both apply."""
    from patchspec.compiler import plan as planner
    from patchspec.compiler.edits import ConflictError
    from tests.compiler.helpers import FILE
    from tests.compiler.kinds.cases import spec

    source = "from m import g\n\ndef f(data):\n    a = g(data)\n    return a\n"
    remove = {"remove": {"statement": "a = g(data)"}}
    for transforms in ((remove, insert), (insert, remove)):
        one = spec("f", *transforms)
        plan = planner.resolve([one], {FILE: source}.get, lambda pkg: True)
        assert not plan.errors, [r.detail for r in plan.errors]
        lost = r"spec fix: t#[01] \(remove, line 4\) removes the statement that t#[01] \(insert_\w+, line 4\)"
        with pytest.raises(ConflictError, match=lost + " is anchored on, so that edit would be lost") as caught:
            planner.emit(plan, [one])
        assert len(caught.value.spec_locations) == 2
