"""The compiler's cheap paths give what the plain, whole walk gives, on real sources.

``scope._function_rebindings`` follows only statements and gathers a function's locals only for an owner
that is not one of its parameters; the whole walk (every node of every function, every local) is kept here
as the oracle, and both must find the same rebindings, in the same order, on vLLM 0.30.0 and on the CVE
examples' packages.
"""
from __future__ import annotations

import ast
import os
import re
import textwrap
from pathlib import Path

import pytest

from patchspec.compiler import pattern, plan, scope
from patchspec.compiler.context import Definition
from patchspec.compiler.source import DefNode, SourceFile
from patchspec.releases import profiles
from patchspec.releases.cache import git_tag_root, pypi_root
from patchspec.spec import SHIPPED, load_spec
from tests.compiler.helpers import FILE, make_spec, target
from tests.conftest import GAUDI_ENV
from tests.specs.test_cve_fixes import FIXES

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


# --- a function's body parsed in part: only the statements that can hold a match ------------------------
#
# ``plan._needs`` names, for each target definition, what its patterns need; with it replaced by one that
# names nothing, every definition is parsed whole, as before the partial parse: that is the oracle.

def _whole(monkeypatch) -> None:
    monkeypatch.setattr(plan, "_needs", lambda specs, keys: {})


def _outcome(specs, read, has_package=lambda package: True) -> tuple:
    resolved = plan.resolve(specs, read, has_package)
    rows = [(r.target, r.index, str(r.status), r.line, r.detail, r.lines, r.note, len(r.edits))
            for r in resolved.resolved]
    if resolved.errors:
        return rows, None, resolved
    texts = plan.emit(resolved, specs)
    return rows, (texts, [str(p) for p in resolved.problems], dict(resolved.rendered)), resolved


def _stand_ins(resolved) -> int:
    return sum(len(d.fragment.stand_ins) for d in resolved.definitions.values()
               if "fragment" in d.__dict__)


def _agree(monkeypatch, specs, read, has_package=lambda package: True) -> int:
    """The partial and the whole parse give the same rows, texts, lint and rendered definitions; the
    number of statements left unparsed."""
    partial = _outcome(specs, read, has_package)
    with monkeypatch.context() as patched:
        _whole(patched)
        whole = _outcome(specs, read, has_package)
    assert partial[:2] == whole[:2]
    assert _stand_ins(whole[2]) == 0
    return _stand_ins(partial[2])


SHIPPED_ON_RELEASES = [
    ("pipeline-parallel.yaml", "v0.30.0", "vllm==0.30.0"),
    ("pipeline-parallel.yaml", "v0.26.0", "vllm==0.26.0"),
    ("cpu-pipeline-eager.yaml", "v0.30.0", "vllm==0.30.0"),
    ("pipeline-transfer.yaml", "v0.30.0", "vllm==0.30.0"),
    ("examples/requests-audit.yaml", "requests-2.31", "requests==2.31.0"),
    *[(f"examples/cve/{fix}.yaml", vulnerable.replace("==", "-"), vulnerable)
      for fix, (_fixed, vulnerable, _older) in FIXES.items()],
]


@pytest.mark.parametrize("spec_name, release, requirement", SHIPPED_ON_RELEASES,
                         ids=[f"{s}-on-{r}" for s, r, _ in SHIPPED_ON_RELEASES])
def test_every_shipped_spec_compiles_alike_with_its_targets_parsed_in_part(spec_name, release, requirement,
                                                                            monkeypatch):
    spec = profiles.for_release(load_spec(str(SHIPPED / spec_name)),
                                profiles.load_profile(profiles.releases_dir(str(SHIPPED / spec_name)), release))
    roots = [pypi_root(requirement)]
    if "parallel" in spec_name and os.environ.get(GAUDI_ENV):
        roots.append(git_tag_root(Path(os.environ[GAUDI_ENV]), "main", "vllm_gaudi"))

    def read(rel: str) -> str | None:
        found = [root / rel for root in roots if (root / rel).is_file()]
        return found[0].read_text(encoding="utf-8") if found else None

    def has_package(package: str) -> bool:
        return any((root / package).is_dir() or (root / f"{package}.py").is_file() for root in roots)

    left = _agree(monkeypatch, [spec], read, has_package)
    if spec_name.startswith("pipeline-parallel"):
        assert left > 100   # vLLM's long definitions were parsed in part


def _large_definitions():
    root = pypi_root("vllm==0.30.0")
    for rel, qualname in [("vllm/v1/core/sched/scheduler.py", "Scheduler.schedule"),
                          ("vllm/config/vllm.py", "VllmConfig.__post_init__"),
                          ("vllm/model_executor/model_loader/weight_utils.py", "safetensors_weights_iterator")]:
        source = SourceFile(rel, (root / rel).read_text(encoding="utf-8"))
        yield source, source.find(qualname), qualname


def _patterns(source: SourceFile, node: ast.AST):
    """Patterns a spec could write for the definition's statements: each one-line simple statement as a
    statement pattern, each loop, ``if`` and ``with`` by its header with a ``...`` body (and with its
    first statement, when that is one line), each call by its function with ``(...)``."""
    for stmt in ast.walk(node):
        if stmt is node or not isinstance(stmt, ast.stmt | ast.Call):
            continue
        if isinstance(stmt, ast.For | ast.While | ast.With | ast.If):
            header = source.lines[stmt.lineno - 1].strip()
            first = stmt.body[0]
            if header.endswith(":"):
                yield f"{header}\n    ...", "statement"
            if header.endswith(":") and first.lineno == first.end_lineno > stmt.lineno:
                yield f"{header}\n    {source.lines[first.lineno - 1].strip()}\n    ...", "statement"
        elif isinstance(stmt, ast.Call):
            yield f"{ast.unparse(stmt.func)}(...)", "expression"
        elif stmt.lineno == stmt.end_lineno and not isinstance(stmt, DefNode):
            yield ast.get_source_segment(source.text, stmt), "statement"


def test_each_statement_of_vllms_long_definitions_is_found_alike_parsed_in_part():
    """Every anchor a spec could write on them: the same matches (none, one, several) on the same lines."""
    compared = 0
    for source, node, qualname in _large_definitions():
        whole = Definition(source, node, qualname)
        for text, form in list(dict.fromkeys(_patterns(source, node)))[::4]:   # a quarter: seconds, not a minute
            try:
                names = pattern.names_needed(text, form)
            except pattern.PatternError:   # an ``elif`` header, a ``with`` item spread over lines
                continue
            if names is None:
                continue
            matcher = pattern.compile_pattern(text, form)
            partial = Definition(source, node, qualname, names)
            assert ([partial.line_of(n) for n in partial.find(matcher)]
                    == [whole.line_of(n) for n in whole.find(matcher)]), (qualname, text)
            compared += 1
    assert compared > 120


CASES = {
    "method": """
        import x
        class K:
            def f(self, a):
                \"\"\"doc\"\"\"
                x = 1; y = 2
                @deco
                def inner():
                    pass
                for i in range(3):
                    total = a.b(i)
                    # deeper comment
                # same level comment
                if a:
                    z = \\
                        3
                s = \"\"\"
                multi
                \"\"\"
                w = 4 \\
                    ; v = 5
                return total
        """,
    "nested": """
        def f(items, flag):
            for item in items:
                if item.send: other = 1
                if item.ready:
                    item.send(1)
                    log("sent")
                elif item.late:
                    log("late")
                else:
                    if flag: log("flagged")
                    log("idle")
            else:
                log("done")
            try:
                result = items.pop()
            except KeyError as err:
                log(err)
            finally:
                log("finally")
            match flag:
                case 1:
                    log("one")
                case _:
                    pass
            while flag:
                step = items.step()
                log(step)
                # inside the loop
            return result
        """,
    "function": """
        def f(a, b=1,
              c=2):  # header comment
            first = 1
            while a:
                a.pop(b)
            return a
        """,
    # a try's clauses (its except before its else and finally), a form feed before an indent (^L)
    "clauses": textwrap.dedent("""
        def f(a, b):
            try:
                y = a.get(b)
            except KeyError:
                q = 1
            else:
                w = (2,
                     3)
            finally:
                v = 4
        ^L    u = (5,
          6)
            return y
        """).replace("^L", "\f"),
}


@pytest.mark.parametrize("case, transforms", [
    pytest.param("method", [{"insert_after": {"anchor": "total = a.b(i)", "code": "print(total)"}}],
                 id="after a statement in a loop"),
    pytest.param("method", [{"insert_before": {"anchor": "return total", "code": "print(total)"}}],
                 id="before the last statement, after comments at two depths"),
    pytest.param("method", [{"insert_before": {"anchor": "y = 2", "code": "print(x)"}}],
                 id="statements that share a line"),
    pytest.param("method", [{"insert_after": {"anchor": "v = 5", "code": "print(w)"}}],
                 id="a statement joined to the one before by a backslash"),
    pytest.param("method", [{"insert_before": {"anchor": "z = 3", "code": "print(a)"}}],
                 id="a statement over two lines"),
    pytest.param("method", [{"loop_guard": {"loop": "for i in range(3): ...", "code": "print(i)"}}],
                 id="a loop's head"),
    pytest.param("method", [{"wrap": {"with": "hook"}}, {"add_argument": {"call": "a.b(...)",
                                                                           "keyword": "k", "value": "1"}}],
                 id="a decorator and a keyword"),
    pytest.param("method", [{"insert_before": {"anchor": "q = 9", "code": "print(a)"}}],
                 id="an anchor found nowhere"),
    pytest.param("method", [{"insert_before": {"anchor": "pass", "code": "print(a)"}}],
                 id="an anchor that needs no name: parsed whole"),
    pytest.param("nested", [{"insert_after": {"anchor": "item.send(1)", "code": "print(item)"}}],
                 id="inside an if inside a loop, an elif and an else beside it"),
    pytest.param("nested", [{"insert_before": {"anchor": "if item.ready: ...", "code": "print(item)"}}],
                 id="an if whose elif is its clause, not a statement (the pattern has none: found nowhere)"),
    pytest.param("nested", [{"insert_before": {"anchor": "if item.send: ...", "code": "print(item)"}}],
                 id="an if whose body is on its line"),
    pytest.param("nested", [{"insert_before": {"anchor": "log('idle')", "code": "print(flag)"}}],
                 id="after a one-line if in an else"),
    pytest.param("nested", [{"insert_after": {"anchor": "log(err)", "code": "print(err)"}},
                            {"add_argument": {"call": "items.pop(...)", "keyword": "k", "value": "1"}}],
                 id="in an except clause, a call in a try"),
    pytest.param("nested", [{"insert_before": {"anchor": "log('one')", "code": "print(flag)"}}],
                 id="in a case of a match"),
    pytest.param("nested", [{"loop_guard": {"loop": "while flag:\n    step = items.step()\n    ...",
                                            "code": "print(flag)"}}],
                 id="a loop matched by its first statement"),
    pytest.param("nested", [{"loop_guard": {"loop": "while flag:\n    log(step)\n    ...",
                                            "code": "print(flag)"}}],
                 id="a loop whose pattern's statement is not its first"),
    pytest.param("nested", [{"loop_guard": {"loop": "for item in items:\n    pass\n    ...",
                                            "code": "print(flag)"}}],
                 id="a loop pattern with a statement that needs no name: parsed whole"),
    pytest.param("function", [{"insert_after": {"anchor": "first = 1", "code": "print(first)"}}],
                 id="a module-level function whose header spans lines"),
    pytest.param("function", [{"insert_before": {"anchor": "a.pop(...)", "code": "print(a)"}},
                              {"remove": {"statement": "first = 1"}}],
                 id="another kind on the target: parsed whole"),
    pytest.param("function", [{"insert_before": {"anchor": "__patchspec_stand_in_0__", "code": "print(a)"}}],
                 id="an anchor that is a stand-in's name: parsed whole"),
    pytest.param("function", [{"insert_after": {"anchor": "first = 1", "code": "__patchspec_stand_in_0__ = 1"}}],
                 id="inserted code that holds a stand-in's name: parsed whole"),
    pytest.param("clauses", [{"insert_before": {"anchor": "y = a.get(b)", "code": "print(a)"}},
                             {"add_argument": {"call": "a.get(...)", "keyword": "k", "value": "1"}}],
                 id="in a try whose except, else and finally stand in, beside a form feed"),
    pytest.param("clauses", [{"insert_before": {"anchor": "return y", "code": "print(y)"}}],
                 id="after statements over several lines that stand in"),
])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_partly_parsed_definition_patches_as_a_whole_one(case, transforms, newline, monkeypatch, request):
    text = textwrap.dedent(CASES[case]).lstrip().replace("\n", newline)
    function = "K.f" if case == "method" else "f"
    spec = make_spec([target(function, *transforms)])
    left = _agree(monkeypatch, [spec], {FILE: text}.get)
    assert bool(left) == ("whole" not in request.node.callspec.id)


def test_a_body_on_the_header_line_or_the_stand_in_name_in_the_file_keeps_the_whole_parse():
    for text in ["def f(): return x\n", "def f(a,\n      b): return b\n",
                 "def f():\n    a = 1\n    b = 2  # __patchspec_stand_in_0__\n    return a\n"]:
        source = SourceFile(FILE, text)
        node = source.find("f")
        fragment = Definition(source, node, "f", (frozenset({"nothing"}),)).fragment
        whole = Definition(source, node, "f").fragment
        assert not fragment.stand_ins
        assert fragment.render(fragment.module) == whole.render(whole.module)
