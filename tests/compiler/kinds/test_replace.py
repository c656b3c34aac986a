"""``replace``: an expression or a statement matched by a pattern with metavariables becomes new code."""
from __future__ import annotations

import pytest

from patchspec.compiler import drift
from patchspec.compiler import plan as planner
from patchspec.compiler.edits import ConflictError
from tests.compiler.helpers import FILE
from tests.compiler.kinds.cases import d, patched, spec

CASES = [
    pytest.param("S.rebuild",
                 {"replace": {"pattern": "$U and $P", "by": 'not scheme.startswith("https") and $U and $P'}},
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
    pytest.param("Markup.unescape", {"replace": {"pattern": "unescape(str($S))",
                                                 "by": "unescape(str($S)).replace('&#39;', \"'\")"}},
                 """
                 class Markup(str):
                     def unescape(self):
                         return unescape(str(self))
                 """,
                 """
                 class Markup(str):
                     def unescape(self):
                         return unescape(str(self)).replace('&#39;', "'")  # patchspec: fix
                 """, id="replace-a-metavariable-argument-is-written-back-as-the-argument-it-matched"),
    pytest.param("Markup.unescape", {"replace": {"pattern": "return unescape($X)",
                                                 "by": "return unescape($X).strip()"}},
                 """
                 class Markup(str):
                     def unescape(self):
                         return unescape(self)
                 """,
                 """
                 class Markup(str):
                     def unescape(self):
                         return unescape(self).strip()  # patchspec: fix
                 """, id="replace-a-statement-with-a-metavariable-argument"),
    pytest.param("f", {"replace": {"pattern": "g($SELF, $X)", "by": "h($SELF + 1, $X)"}},
                 """
                 from m import g, h

                 def f(a):
                     return g(a, key=1)
                 """,
                 """
                 from m import g, h

                 def f(a):
                     return h(a + 1, key=1)  # patchspec: fix
                 """, id="replace-a-metavariable-argument-keeps-its-keyword-where-an-argument-goes"),
    pytest.param("_space_re", {"replace": {"pattern": "_space_re = $V",
                                           "by": '_attr_key_re = re.compile(r"[\\s/>=]", flags=re.ASCII)'}},
                 r"""
                 import re

                 _space_re = re.compile(r"\s", flags=re.ASCII)
                 """,
                 r"""
                 import re

                 _attr_key_re = re.compile(r"[\s/>=]", flags=re.ASCII)  # patchspec: fix
                 """, id="replace-a-module-level-assignment-the-target-names"),
    pytest.param("f", {"replace": {"pattern": "g(str($S), $$$REST)", "by": "g($$$REST)"}},
                 """
                 from m import g

                 def f(x, y):
                     return g(str(x), y, 3)
                 """,
                 """
                 from m import g

                 def f(x, y):
                     return g(y, 3)  # patchspec: fix
                 """, id="replace-by-a-more-general-call-drops-the-argument-it-matched"),
]


REFUSALS = [
    pytest.param("f", {"replace": {"pattern": "$A + $A", "by": "2 * $A"}}, "def f(x, y):\n    return x + y\n",
                 "missing", id="a-metavariable-named-twice-must-match-equal-code"),
    pytest.param("f", {"replace": {"pattern": "g($X)", "by": "h($X)"}}, "def f():\n    g(1)\n    g(2)\n",
                 "ambiguous", id="matched-twice-is-refused-with-both-lines"),
    pytest.param("f", {"replace": {"pattern": "g($X)", "by": "h($Y)"}}, "def f():\n    g(1)\n",
                 "not-applicable", id="the-replacement-names-an-unbound-metavariable"),
]


@pytest.mark.parametrize("outer,inner", [
    pytest.param({"replace": {"pattern": "if data:\n    ...", "by": "if data:\n    a = 1\n    b = 3\n"}},
                 {"replace": {"pattern": "a = 1", "by": "a = 10"}}, id="a-replace-of-a-block-and-one-inside-it"),
    pytest.param({"remove": {"statement": "if data:\n    ..."}},
                 {"insert_after": {"anchor": "a = 1", "code": "a += 1"}}, id="a-removed-block-and-an-insert-inside-it"),
    pytest.param({"replace": {"pattern": "a = 1", "by": "a = 2"}},
                 {"replace": {"pattern": "a = $X", "by": "a = $X + 1"}}, id="two-replaces-of-one-statement"),
])
def test_overlapping_rewrites_of_one_spec_are_one_conflict_naming_both(outer, inner):
    """h11 0.15.0 ChunkedReader: a replace covering statements the spec's other transforms edit wrote only
    the outer one, silently."""
    source = d("""
               def f(data):
                   if data:
                       a = 1
                       b = 2
                   return data
               """)
    for transforms in ((outer, inner), (inner, outer)):
        one = spec("f", *transforms)
        plan = planner.resolve([one], {FILE: source}.get, lambda pkg: True)
        assert not plan.errors, [r.detail for r in plan.errors]
        with pytest.raises(ConflictError, match=r"spec fix: t#[01] \(\w+, line \d\) rewrites the code that t#[01] "
                                                r"\(\w+, line \d\) edits, so that edit would be lost") as caught:
            planner.emit(plan, [one])
        assert len(caught.value.spec_locations) == 2


def test_one_spec_may_insert_next_to_the_statement_it_rewrites():
    source = d("""
               def f(data):
                   a = g(data)
                   return a
               """)
    one = spec("f", {"insert_before": {"anchor": "a = g(data)", "code": "data = data or {}"}},
               {"replace": {"pattern": "g(data)", "by": "g(data, strict=True)"}})
    plan = planner.resolve([one], {FILE: "from m import g\n\n" + source}.get, lambda pkg: True)
    assert not plan.errors, [r.detail for r in plan.errors]
    assert "    data = data or {}  # patchspec: fix\n    a = g(data, strict=True)  # patchspec: fix\n" in \
        planner.emit(plan, [one])[FILE]


def test_comments_a_replacement_starts_and_ends_with_are_kept_as_the_diff_has_them():
    """They were dropped: a statement replaced by several kept only their code."""
    source = "from m import g\n\ndef f(d):\n    rv = g(d)\n    return rv\n"
    by = "# first, the items\nitems = list(d)\nrv = g(items)\n# then the rest\n"
    assert patched("f", {"replace": {"pattern": "rv = g(d)", "by": by}}, source) == (
        "from m import g\n\ndef f(d):\n    # first, the items\n    items = list(d)  # patchspec: fix\n"
        "    rv = g(items)  # patchspec: fix\n    # then the rest\n    return rv\n")


@pytest.mark.parametrize("source,obsolete", [
    pytest.param("def f(x, y):\n    return g(str(x), y, 3)\n", False, id="the-pattern-s-match-still-needs-it"),
    pytest.param("def f(x, y):\n    return g(y, 3)\n", True, id="the-rewritten-call-is-obsolete"),
])
def test_a_by_more_general_than_its_pattern_holds_the_replacement_only_where_the_pattern_no_longer_matches(
        source, obsolete):
    """``g($$$REST)`` matches ``g(str(x), y, 3)`` too: it was called obsolete, exit 0, the argument kept."""
    rows = drift.file_drift(spec("f", {"replace": {"pattern": "g(str($S), $$$REST)", "by": "g($$$REST)"}}),
                            FILE, "from m import g\n\n" + source, None, True, {})
    assert [r.drift is drift.Drift.OBSOLETE for r in rows] == [obsolete]
