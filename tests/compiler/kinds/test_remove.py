"""``remove``: a statement taken out, its marker line left in its place."""
from __future__ import annotations

import pytest

from tests.compiler.kinds.cases import d, patched

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
]


@pytest.mark.parametrize("function,transform,source,expected", CASES)
def test_remove(function, transform, source, expected):
    assert patched(function, transform, source) == d(expected)


def test_a_removed_assignment_unbinds_its_name():
    from patchspec.compiler.transforms import KINDS

    assert KINDS["remove"].binds({"statement": "label = str(label)"}).unbinds == {"label"}
