"""Before/after pairs for the rewrite kinds (replace, remove, set, guard), in pyupgrade's shape: each case
is a source, one transform and the text it must become, byte for byte outside the rewritten lines; then
what they refuse and what drift makes of a release that already has the change."""
from __future__ import annotations

import textwrap

import pytest

from patchspec.compiler import drift
from patchspec.compiler import plan as planner
from patchspec.compiler.plan import ConflictError
from patchspec.spec import build_spec
from tests.compiler.helpers import FILE


def d(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def spec(function: str, *transforms: dict, name: str = "fix"):
    return build_spec({"spec": 1, "name": name, "summary": "t",
                       "targets": [{"id": "t", "file": FILE, "function": function, "transforms": list(transforms)}]},
                      f"{name}.yaml", "0" * 64)


def emit(source: str, *specs) -> planner.Plan:
    plan = planner.resolve(specs, {FILE: d(source)}.get, lambda pkg: True)
    assert not plan.errors, [r.detail for r in plan.errors]
    plan.text = planner.emit(plan, specs)[FILE] if plan.files else d(source)
    return plan


CASES = [
    pytest.param("S.rebuild", {"replace": {"pattern": "$U and $P", "by": 'not scheme.startswith("https") and $U and $P'}},
                 """
                 class S:
                     def rebuild(self, proxies, scheme):
                         username, password = get_auth(proxies)

                         if username and password:   # keep me
                             headers["Proxy-Authorization"] = auth(username, password)
                 """,
                 """
                 class S:
                     def rebuild(self, proxies, scheme):
                         username, password = get_auth(proxies)

                         if not scheme.startswith("https") and username and password:   # keep me  # patchspec: fix
                             headers["Proxy-Authorization"] = auth(username, password)
                 """, id="replace-expression-in-an-if-test-keeps-its-comment"),
    pytest.param("f", {"replace": {"pattern": "g($$$ARGS)", "by": "g($$$ARGS, strict=True)"}},
                 """
                 from m import g

                 def f(a):
                     return g(a,  # first
                              2)
                 """,
                 """
                 from m import g

                 def f(a):
                     return g(a,  # first
                              2, strict=True)  # patchspec: fix
                 """, id="replace-a-run-metavariable-keeps-upstream-s-layout"),
    pytest.param("f", {"replace": {"pattern": 'rv = " ".join(...)',
                                   "by": 'items = []\nfor k, v in d.items():\n    if v is None:\n        continue\n'
                                         '    items.append(f"{k}={v}")\nrv = " ".join(items)\n'}},
                 '''
                 def f(d):
                     """Doc."""
                     # join them
                     rv = " ".join(
                         f"{k}={v}"
                         for k, v in d.items()
                         if v is not None
                     )
                     return rv
                 ''',
                 '''
                 def f(d):
                     """Doc."""
                     # join them
                     items = []  # patchspec: fix
                     for k, v in d.items():  # patchspec: fix
                         if v is None:  # patchspec: fix
                             continue  # patchspec: fix
                         items.append(f"{k}={v}")  # patchspec: fix
                     rv = " ".join(items)  # patchspec: fix
                     return rv
                 ''', id="replace-a-statement-by-several-each-line-marked"),
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
    pytest.param("T.flatten", {"guard": {"statements": "for token in self.tokens: ...",
                                         "by": "try:\n    $$$BODY\nexcept RecursionError as err:\n"
                                               "    raise ValueError('deep') from err\n"}},
                 '''
                 class T:
                     def flatten(self):
                         """Doc."""
                         for token in self.tokens:
                             if token.is_group:
                                 yield from token.flatten()
                             else:
                                 yield token
                 ''',
                 '''
                 class T:
                     def flatten(self):
                         """Doc."""
                         try:  # patchspec: fix
                             for token in self.tokens:
                                 if token.is_group:
                                     yield from token.flatten()
                                 else:
                                     yield token
                         except RecursionError as err:  # patchspec: fix
                             raise ValueError('deep') from err  # patchspec: fix
                 ''', id="guard-a-loop-in-try-except"),
    pytest.param("f", {"guard": {"statements": "a = open_it()\n...\nreturn b",
                                 "by": "with lock:\n    $$$BODY\n"}},
                 """
                 def f(lock):
                     x = 0
                     # take it
                     a = open_it()
                     b = a.read()
                     return b
                 """,
                 """
                 def f(lock):
                     x = 0
                     # take it
                     with lock:  # patchspec: fix
                         a = open_it()
                         b = a.read()
                         return b
                 """, id="guard-a-run-of-statements-in-with"),
]


@pytest.mark.parametrize("function,transform,source,expected", CASES)
def test_rewrite(function, transform, source, expected):
    plan = emit(source, spec(function, transform))
    assert not plan.problems, plan.problems
    assert plan.text == d(expected)


@pytest.mark.parametrize("function,transform,source,what", [
    pytest.param("f", {"replace": {"pattern": "$A + $A", "by": "2 * $A"}}, "def f(x, y):\n    return x + y\n",
                 "missing", id="a-metavariable-named-twice-must-match-equal-code"),
    pytest.param("f", {"replace": {"pattern": "g($X)", "by": "h($X)"}}, "def f():\n    g(1)\n    g(2)\n",
                 "ambiguous", id="matched-twice-is-refused-with-both-lines"),
    pytest.param("f", {"replace": {"pattern": "g($X)", "by": "h($Y)"}}, "def f():\n    g(1)\n",
                 "not-applicable", id="the-replacement-names-an-unbound-metavariable"),
    pytest.param("f", {"set": {"parameter": "x", "value": "1"}}, "def f(x):\n    pass\n",
                 "not-applicable", id="set-a-parameter-without-a-default"),
    pytest.param("f", {"guard": {"statements": "x = 1", "by": "if y:\n    $$$BODY\n"}}, "def f():\n    x = 1\n",
                 "not-applicable", id="a-guard-is-a-try-or-a-with"),
])
def test_refused(function, transform, source, what):
    plan = planner.resolve([spec(function, transform)], {FILE: source}.get, lambda pkg: True)
    assert [r.status for r in plan.resolved] == [what], plan.resolved[0].detail


def test_a_rewrite_of_another_spec_s_anchor_is_refused_naming_both():
    source = "from m import go, note, ok\n\n\ndef f(u, p):\n    if u and p:\n        go()\n"
    fix = spec("f", {"replace": {"pattern": "u and p", "by": "u and p and ok()"}}, name="fix")
    hook = spec("f", {"insert_before": {"anchor": "if u and p: ...", "code": "note()"}}, name="hook")
    plan = planner.resolve([fix, hook], {FILE: source}.get, lambda pkg: True)
    with pytest.raises(ConflictError, match=r"spec fix .* would change what spec hook .* is anchored on"):
        planner.emit(plan, [fix, hook])


def test_a_release_that_has_the_replacement_is_obsolete_for_that_transform():
    fixed = "def f(u, p, scheme):\n    if not scheme.startswith('https') and u and p:\n        go()\n"
    rows = drift.file_drift(spec("f", {"replace": {"pattern": "$U and $P",
                                                    "by": 'not scheme.startswith("https") and $U and $P'}}),
                            FILE, fixed, None, True, {})
    assert [(r.drift, r.under) for r in rows] == [(drift.OBSOLETE, drift.UNRECORDED)]
    assert drift.exit_code(rows) == 1


def test_a_replaced_expression_that_changed_is_anchor_missing():
    changed = "def f(u, p):\n    if u or p:\n        go()\n"
    rows = drift.file_drift(spec("f", {"replace": {"pattern": "$U and $P", "by": "$U and $P and ok()"}}),
                            FILE, changed, None, True, {})
    assert [r.drift for r in rows] == [drift.ANCHOR_MISSING]
