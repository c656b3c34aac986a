"""The compiler's cheap paths give what the plain, whole walk gives, on real sources.

``scope._function_rebindings`` follows only statements and gathers a function's locals only for an owner
that is not one of its parameters; the whole walk (every node of every function, every local) is kept here
as the oracle, and both must find the same rebindings, in the same order, on vLLM 0.30.0 and on the CVE
examples' packages.
"""
from __future__ import annotations

import ast
import re
import textwrap

import pytest

from patchspec.compiler import scope
from patchspec.releases.cache import pypi_root
from tests.test_cve_fixes import FIXES

CVE_RELEASES = sorted({vulnerable for _fixed, vulnerable, _older in FIXES.values()})


def whole_walk_rebindings(tree: ast.Module) -> dict:
    """Every node of every function walked, every function's locals gathered first."""
    found: dict = {}
    for func in ast.walk(tree):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        body = list(scope.walk_scope(func.body))
        declared = {name for n in body if isinstance(n, ast.Global) for name in n.names}
        local = ({a.arg for a in ast.walk(func.args) if isinstance(a, ast.arg)}
                 | {name for n in body for name in scope.bound_by(n)}) - declared
        for stmt in body:
            if not isinstance(stmt, ast.stmt) or isinstance(stmt, ast.Global):
                continue
            for name in sorted(declared & scope.statement_binds(stmt)):
                found.setdefault(name, []).append((stmt, scope.keeps(stmt, name), func.name, func.lineno))
            for owner, attr, value in scope._attribute_sets(stmt):
                if owner not in local:
                    found.setdefault((owner, attr), []).append(
                        (stmt, scope._keeps(value, attr, owner), func.name, func.lineno))
    return found


def statement_walk_rebindings(tree: ast.Module) -> dict:
    """What the compiler finds, in the oracle's shape (the function named in ``where``)."""
    out: dict = {}
    for key, rebindings in scope._function_rebindings.__wrapped__(tree).items():
        for r in rebindings:
            name, _, line = r.where.rpartition(", line ")
            out.setdefault(key, []).append((r.node, r.keeps, name.split(" ")[-1], int(line)))
    return out


# What a rebinding needs in the text: a ``global``, a ``setattr`` or an indented ``name.attr = ...`` of a
# name other than ``self``/``cls`` (the files without one have none, and would only slow the test).
REBINDING_TEXT = re.compile(r"global |setattr\(|^[ \t]+(?!self\.|cls\.)[A-Za-z_]\w*\.\w+[ \t]*[-+*/|&]?=[^=]", re.M)


def _files(root, every: bool):
    """The root's files: all of them, or (for vLLM's 2,700) those whose text could hold a rebinding."""
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if every or REBINDING_TEXT.search(text):
            yield path, text


@pytest.mark.parametrize("release", ["vllm==0.30.0", *CVE_RELEASES])
def test_rebindings_from_a_statement_walk_are_the_whole_walks(release):
    compared = found = 0
    for path, text in _files(pypi_root(release), every=release != "vllm==0.30.0"):
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        expected = whole_walk_rebindings(tree)
        assert statement_walk_rebindings(tree) == expected, path
        compared += 1
        found += sum(len(v) for v in expected.values())
    assert compared and (found or release != "vllm==0.30.0")   # vLLM's files hold rebindings to compare


@pytest.mark.parametrize("source", [
    pytest.param("""
        def setup(self, owner):
            global owner
            owner.attr = 1
        """, id="a parameter declared global is no local"),
    pytest.param("""
        def setup(self):
            owner = make()
            owner.attr = 1
            Other.attr = 2
            try:
                pass
            except E as Third:
                Third.attr = 3
            match x:
                case Fourth():
                    Fourth.attr = 4
        """, id="locals bound before, in an except clause and in a case"),
    pytest.param("""
        class K:
            def m(self):
                def inner():
                    global g
                    g = 1
                    self.attr = 2
                return inner
        async def a(cls):
            async with x as cls:
                cls.attr = 3
            Top.attr = lambda Top: Top
        """, id="nested functions, async, a lambda's parameter"),
])
def test_rebindings_agree_on_the_shapes_that_could_part_them(source):
    tree = ast.parse(textwrap.dedent(source))
    assert statement_walk_rebindings(tree) == whole_walk_rebindings(tree)
