"""``set``: a new value for an existing binding (module-, class- or function-level, a default)."""
from __future__ import annotations

import pytest

from tests.compiler.kinds.cases import d, patched, status

CASES = [
    pytest.param("Retry.DEFAULT", {"set": {"value": 'frozenset(\n    ["Cookie", "Authorization"]\n)'}},
                 """
                 class Retry:
                     #: doc
                     DEFAULT = frozenset(["Authorization"])

                     def __init__(self, x=DEFAULT):
                         pass
                 """,
                 """
                 class Retry:
                     #: doc
                     DEFAULT = frozenset(
                         ["Cookie", "Authorization"]
                     )  # patchspec: fix

                     def __init__(self, x=DEFAULT):
                         pass
                 """, id="set-a-class-level-name-on-several-lines"),
    pytest.param("LIMIT", {"set": {"value": "253"}},
                 """
                 import re

                 LIMIT = 64
                 """,
                 """
                 import re

                 LIMIT = 253  # patchspec: fix
                 """, id="set-a-module-level-name"),
    pytest.param("Retry.__init__", {"set": {"parameter": "y", "value": "4"}},
                 """
                 class Retry:
                     def __init__(self, x=1, y=3):
                         pass
                 """,
                 """
                 class Retry:
                     def __init__(self, x=1, y=4):  # patchspec: fix
                         pass
                 """, id="set-a-parameter-default-marks-the-def-line"),
    pytest.param("from_bytes", {"set": {"parameter": "threshold", "value": "0.3"}},
                 """
                 def from_bytes(
                     sequences,
                     threshold: float = 0.2,  # the mess ratio
                     explain: bool = False,
                 ) -> None:
                     pass
                 """,
                 """
                 def from_bytes(
                     sequences,
                     threshold: float = 0.3,  # the mess ratio  # patchspec: fix
                     explain: bool = False,
                 ) -> None:
                     pass
                 """, id="set-a-default-of-a-signature-one-parameter-a-line-marks-that-line-alone"),
    pytest.param("f", {"set": {"name": "limit", "value": "10"}},
                 """
                 def f():
                     limit = 5
                     return limit
                 """,
                 """
                 def f():
                     limit = 10  # patchspec: fix
                     return limit
                 """, id="set-a-local-assignment-by-name"),
]


@pytest.mark.parametrize("function,transform,source,expected", CASES)
def test_set(function, transform, source, expected):
    assert patched(function, transform, source) == d(expected)


@pytest.mark.parametrize("function,transform,source,what", [
    pytest.param("f", {"set": {"parameter": "x", "value": "1"}}, "def f(x):\n    pass\n",
                 "not-applicable", id="set-a-parameter-without-a-default"),
])
def test_set_refused(function, transform, source, what):
    assert status(function, transform, source) == what
