"""``set``: a new value for an existing binding (module-, class- or function-level, a default)."""
from __future__ import annotations

import pytest

from patchspec.compiler import plan as planner
from tests.compiler.helpers import FILE
from tests.compiler.kinds.cases import d, spec

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
    pytest.param("Cache.pop", {"set": {"parameter": "default", "value": "__missing"}},
                 """
                 class Cache:
                     __marker = object()
                     __missing = object()

                     def pop(self, key, default=__marker):
                         pass
                 """,
                 """
                 class Cache:
                     __marker = object()
                     __missing = object()

                     def pop(self, key, default=__missing):  # patchspec: fix
                         pass
                 """, id="set-a-default-to-a-class-private-name-the-class-body-binds-before-the-def"),
    pytest.param("ParseError.__init__", {"set": {"parameter": "msg", "value": "_ERROR_MESSAGE + '!'"}},
                 """
                 class ParseError(Exception):
                     _ERROR_MESSAGE = 'Invalid jmespath expression'

                     def __init__(self, msg=_ERROR_MESSAGE):
                         pass
                 """,
                 """
                 class ParseError(Exception):
                     _ERROR_MESSAGE = 'Invalid jmespath expression'

                     def __init__(self, msg=_ERROR_MESSAGE + '!'):  # patchspec: fix
                         pass
                 """, id="set-a-default-to-a-value-reading-a-class-level-name"),
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


REFUSALS = [
    pytest.param("f", {"set": {"parameter": "x", "value": "1"}}, "def f(x):\n    pass\n",
                 "not-applicable", id="set-a-parameter-without-a-default"),
    # an annotation alone binds nothing to set (it was a StopIteration traceback: a None value has no statement)
    pytest.param("f", {"set": {"name": "x", "value": "1"}}, "def f():\n    x: int\n    return 1\n",
                 "not-applicable", id="set-a-name-only-annotated"),
]


@pytest.mark.parametrize("value, unbound", [
    pytest.param("x", "x", id="the-function-s-own-parameter"),
    pytest.param("LATER", "LATER", id="a-class-level-name-bound-after-the-def"),
])
def test_set_of_a_default_reads_only_names_bound_where_the_def_runs(value, unbound):
    """A default is evaluated when the ``def`` runs, in the class body or module around it."""
    source = d("""
               class C:
                   def f(self, x, y=1):
                       pass

                   LATER = 2
               """)
    one = spec("C.f", {"set": {"parameter": "y", "value": value}})
    plan = planner.resolve([one], {FILE: source}.get, lambda pkg: True)
    assert [(r.status, r.detail) for r in plan.resolved] == [
        ("unbound-name", f"inserted code reads a name not bound before it: C.f:2: {unbound}")]
