"""Anchor patterns match structure, not text."""
from __future__ import annotations

import libcst as cst
import libcst.matchers as m
import pytest

from patchspec.compiler import pattern
from tests.compiler.helpers import make_spec, resolve, target


def matches(pat: str, code: str, form: str = "statement") -> bool:
    node = cst.parse_module(code + "\n").body[0] if form == "statement" else cst.parse_expression(code)
    return m.matches(node, pattern.compile_pattern(pat, form))


@pytest.mark.parametrize("pat, code, form, expected", [
    ("x = f(...)", "x = f()", "statement", True),
    ("x = f(...)", "x   =   f( a,\n b )  # note", "statement", True),
    ("x = f(...)", "(x) = (f(a))", "statement", True),
    ("x = f(...)", "y = f(a)", "statement", False),
    ("x = f(...)", "x = g(a)", "statement", False),
    ("x = ...", "x = 1 + 2", "statement", True),
    ("f(a, ...)", "f(a)", "expression", True),
    ("f(a, ...)", "f(a, b, c=1)", "expression", True),
    ("f(a, ...)", "f(b, a)", "expression", False),
    ("f(a)", "f(a, b)", "expression", False),
    ("f(..., k=1)", "f(z, j=2, k=1)", "expression", True),
    ("f(..., k=1)", "f(z, k=2)", "expression", False),
    ("f(..., k=...)", "f(k=[1, 2])", "expression", True),
    ("f(..., k=...)", "f(j=1)", "expression", False),
    ("self.a.b(...)", "self.a.b()", "expression", True),
    ("self.a.b(...)", "self.a.c()", "expression", False),
    ("x == 'a'", "x == 'a'", "expression", True),
    ("x == 'a'", "x != 'a'", "expression", False),
    ("x + 1", "x - 1", "expression", False),
    ("while a < b: ...", "while a < b:\n    pass\n    x = 1", "statement", True),
    ("while a < b: ...", "while a <= b:\n    pass", "statement", False),
    ("while c:\n    first()\n    ...", "while c:\n    first()\n    second()", "statement", True),
    ("while c:\n    first()\n    ...", "while c:\n    second()\n    first()", "statement", False),
    ("while c:\n    first()\n    ...", "while c: first()", "statement", True),
    ("for x in y: ...", "for x in y:\n    pass", "statement", True),
    ("for x in y: ...", "async for x in y:\n    pass", "statement", False),
    ("async for x in y: ...", "async for x in y:\n    pass", "statement", True),
    ("if a: b()", "if a:\n    b()", "statement", True),
    ("return", "return None", "statement", False),
    ("return", "return", "statement", True),
    ("with a(...): ...", "with a(1) as b:\n    pass", "statement", False),
    ("with a(...) as b: ...", "with a(1) as b:\n    pass", "statement", True),
])
def test_matches(pat, code, form, expected):
    assert matches(pat, code, form) is expected


@pytest.mark.parametrize("text, form, message", [
    ("x = (", "statement", "not valid Python"),
    ("a = 1\nb = 2", "statement", "exactly one statement"),
    ("x = 1\n", "code", None),
    ("if x:\n    y()", "code", "one line"),
    ("def", "expression", "not valid Python"),
])
def test_parse_errors(text, form, message):
    if message is None:
        assert isinstance(pattern.parse(text, form), cst.SimpleStatementLine)
    else:
        with pytest.raises(pattern.PatternError, match=message):
            pattern.parse(text, form)


def test_comments_and_docstrings_are_layout_not_meaning():
    fields = dict(pattern.semantic_fields(cst.parse_statement("x = f(a)  # c\n")))
    assert set(fields) == {"body"}


def test_f_strings_match_whatever_their_quotes_and_prefix_case():
    source = "def f(x):\n    log(F'x={x}')\n    log(rf\"y={x}\")\n"
    spec = make_spec([target("f", {"insert_after": {"anchor": 'log(f"x={x}")', "code": "_s.a()"}},
                             {"insert_after": {"anchor": "log(fr'y={x}')", "code": "_s.b()"}})])
    plan = resolve(source, spec)
    assert [r.line for r in plan.resolved] == [2, 3]
