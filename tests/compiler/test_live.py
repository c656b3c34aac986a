"""The static live-binding rules (issue 20): a target, a member or a keyword is patched only where the
patched code is what runs. Each table row: a toy source, the spec's transform, and the verdict."""
from __future__ import annotations

import textwrap

import pytest

from patchspec.compiler import bindings
from patchspec.compiler.edits import ConflictError
from patchspec.compiler.plan import emit
from patchspec.compiler.source import SourceFile
from tests.compiler.helpers import make_spec, patch, resolve, target

WRAP = {"wrap": {"with": "hook"}}


def _verdict(source: str, function: str, transform: dict, branch: str | None = None) -> tuple[str, str]:
    spec_target = target(function, transform)
    if branch:
        spec_target["branch"] = branch
    plan = resolve(textwrap.dedent(source).lstrip(), make_spec([spec_target]))
    row = plan.resolved[0]
    return str(row.status), row.detail


@pytest.mark.parametrize("source, function, why", [
    pytest.param("""
        def f():
            return 1
        f = other
        """, "f", "f is bound by `f = other` at line 3 after its definition at line 1", id="a later assignment"),
    pytest.param("""
        def f():
            return 1
        from fast import f
        """, "f", "`from fast import f` at line 3", id="a later import"),
    pytest.param("""
        def f():
            global f
            f = g
            return 1
        """, "f", "f is rebound at line 3 (`f = g`, through `global` in f, line 1)",
        id="a function that rebinds itself"),
    pytest.param("""
        def f():
            return 1
        def setup():
            global f
            f = g
        """, "f", "f is rebound at line 5 (`f = g`, through `global` in setup",
        id="another function's global rebinding"),
    pytest.param("""
        class A:
            def m(self):
                return 1
        A.m = other
        """, "A.m", "A.m is rebound at line 4 (`A.m = other`)", id="a module-level Class.attr"),
    pytest.param("""
        class A:
            def m(self):
                return 1
        def install():
            A.m = other
        """, "A.m", "A.m is rebound at line 5 (`A.m = other`, in install, line 4", id="a function's Class.attr"),
    pytest.param("""
        class A:
            def m(self):
                return 1
        setattr(A, "m", other)
        """, "A.m", "A.m is rebound at line 4 (`setattr(A, 'm', other)`)", id="a module-level setattr"),
    pytest.param("""
        class A:
            def m(self):
                return 1
        def install(cls):
            setattr(A, "m", other)
        """, "A.m", "A.m is rebound at line 5 (`setattr(A, 'm', other)`, in install", id="a function's setattr"),
    pytest.param("""
        class A:
            def m(self):
                return 1
        def install():
            A.m, A.n = other, 2
        """, "A.m", "A.m is rebound at line 5 (`A.m, A.n = (other, 2)`, in install",
        id="unpacked targets in a function"),
    pytest.param("""
        class A:
            def m(self):
                return 1
        A.n, *A.m = 1, other
        """, "A.m", "A.m is rebound at line 4 (`A.n, *A.m = (1, other)`)", id="a starred target at module level"),
    pytest.param("""
        class A:
            def m(self):
                return 1
        def install():
            for A.m in others:
                pass
        """, "A.m", "A.m is rebound at line 5 (`for A.m in others: ...`, in install", id="a for target"),
    pytest.param("""
        class A:
            def m(self):
                return 1
        def install():
            with patched() as A.m:
                pass
        """, "A.m", "A.m is rebound at line 5 (`with patched() as A.m: ...`, in install", id="a with target"),
    pytest.param("""
        def f():
            return 1
        def install():
            global f
            while (f := other):
                pass
        """, "f", "f is rebound at line 5 (`while (f := other):`, through `global` in install",
        id="a walrus in a loop's test through global"),
    pytest.param("""
        try:
            from fast import K
        except ImportError:
            class K:
                pass
        """, "K", "try (line 2: `from fast import K`), except ImportError (line 4: class K)",
        id="a fallback class another branch binds"),
    pytest.param("""
        class A:
            @property
            def p(self):
                return 1
            p = 2
        """, "A.p", "p is bound by `p = 2` at line 5", id="a property rebound"),
    pytest.param("""
        def f():
            return 1
        g = h
        """, "g", "g is bound by `g = h` at line 3", id="an alias of a name with no definition here"),
    pytest.param("""
        if fast:
            g = f
        """, "g", "g is bound", id="an alias in a branch"),
    pytest.param("""
        def f():
            return 1
        register(f)
        del f
        """, "f", "f is bound by `del f` at line 4 after its definition at line 1", id="deleted, kept by no name"),
    pytest.param("""
        def f():
            return 1
        del f
        A.f = f
        """, "f", "f is bound by `del f` at line 3", id="deleted before the statement that would keep it"),
])
def test_a_target_that_is_not_the_live_binding_is_refused_naming_the_binding(source, function, why):
    status, detail = _verdict(source, function, WRAP)
    assert status in ("not-live", "target-ambiguous") and why in detail, detail


@pytest.mark.parametrize("source", [
    pytest.param("class A:\n    def m(self):\n        return 1\ndef install():\n    A.m = deco(A.m)\n",
                 id="a function's Class.attr that wraps the method"),
    pytest.param("class A:\n    def m(self):\n        return 1\ndef install(A):\n    A.m = other\n",
                 id="a parameter of that name is another object"),
    pytest.param("class A:\n    def m(self):\n        return 1\ndef install():\n    A.m, A.n = deco(A.m), 2\n",
                 id="an unpacked target whose item wraps the method"),
    pytest.param("class A:\n    def m(self):\n        return 1\ndef install(cls):\n    setattr(cls, 'm', other)\n",
                 id="a setattr on another name"),
])
def test_a_rebinding_that_keeps_the_method_or_binds_another_object_is_no_refusal(source):
    assert _verdict(source, "A.m", WRAP)[0] == "ok"


PROPERTY = """
    class A:
        @property
        def p(self):
            return 1

        @p.setter
        def p(self, value):
            pass

        @p.deleter
        def p(self):
            pass
    """


@pytest.mark.parametrize("source, function, branch, line", [
    pytest.param("""
        def f():
            return 1
        f = deco(f)
        """, "f", None, 1, id="a rebinding that wraps the definition keeps it live"),
    pytest.param("""
        try:
            from fast import K
        except ImportError:
            class K:
                def m(self):
                    return 1
        """, "K.m", "except ImportError", 5, id="a fallback chosen by branch"),
    pytest.param("""
        def f():
            global COUNT
            COUNT = 1
        """, "f", None, 1, id="a global rebinding of another name"),
    pytest.param(PROPERTY, "A.p", None, 3, id="Class.prop is the getter"),
    pytest.param(PROPERTY, "A.p.setter", None, 7, id="Class.prop.setter is the setter"),
    pytest.param(PROPERTY, "A.p.deleter", None, 11, id="Class.prop.deleter is the deleter"),
    pytest.param("""
        class A:
            @property
            def default_name(self):
                return 1
            defaultName = default_name
        """, "A.defaultName", None, 3, id="a class-level alias is the definition it holds (pyparsing)"),
    pytest.param("""
        def f():
            return 1
        g = f
        h = g
        """, "h", None, 1, id="an alias of an alias"),
    pytest.param("""
        def f():
            return 1
        g = f
        def f():
            return 2
        """, "g", None, 1, id="an alias holds the definition bound before it, not a later one"),
    pytest.param("""
        class NodeType(type):
            pass
        def _failing_new(*args):
            raise TypeError
        NodeType.__new__ = staticmethod(_failing_new)
        del _failing_new
        """, "_failing_new", None, 3, id="deleted after a class attribute kept it (jinja2)"),
    pytest.param("""
        def f():
            return 1
        g = f
        del f
        """, "f", None, 1, id="deleted after a name kept it"),
    pytest.param("""
        class FrozenDict(dict):
            def _raise_frozen_typeerror(self, *a, **kw):
                raise TypeError
            __ior__ = __setitem__ = update = _raise_frozen_typeerror
            del _raise_frozen_typeerror
        """, "FrozenDict._raise_frozen_typeerror", None, 2,
        id="deleted after a chained assignment kept it (boltons)"),
])
def test_the_live_definition_is_found(source, function, branch, line):
    assert SourceFile("m.py", textwrap.dedent(source).lstrip()).find(function, branch).lineno == line


def test_a_property_getter_takes_an_insert_at_its_return():
    source = """
        class A:
            @property
            def p(self):
                return self._p.strip()

            @p.setter
            def p(self, value):
                self._p = value
        """
    insert = {"insert_before": {"anchor": "return self._p.strip()", "code": "_s.note(self)"}}
    assert _verdict(source, "A.p", insert)[0] == "ok"
    assert _verdict(source, "A.p.setter", insert)[0] == "missing"


def test_definitions_name_the_setter_as_such():
    source = SourceFile("m.py",
                        "class A:\n    @property\n    def p(self): ...\n    @p.setter\n    def p(self, v): ...\n")
    assert [name for name, _ in source.definitions()] == ["A", "A.p", "A.p.setter"]


CLASS = """
    LIMIT = 3


    class A:
        DEFAULT = frozenset(["a"])
        SIZE = 4

        def __init__(self, remove=DEFAULT, size=LIMIT):
            self.remove = remove
            self.cache = {}

        def stream(self):
            return iter(())
    A.extra = 1
    """


@pytest.mark.parametrize("transform, why", [
    pytest.param({"add_attribute": {"name": "DEFAULT", "value": "frozenset()"}},
                 "A's body reads DEFAULT at line 8 (a default argument of __init__)", id="a default captured"),
    pytest.param({"add_attribute": {"name": "LIMIT", "value": "5"}},
                 "reads LIMIT at line 8", id="a module name a default captured"),
    pytest.param({"add_attribute": {"name": "SIZE", "value": "5"}},
                 "A already binds SIZE at line 6 (`SIZE = 4`): add_attribute would silently replace it; change an "
                 "existing binding with the rewrite kinds `set`", id="an attribute the class binds"),
    pytest.param({"add_method": {"name": "stream", "with": "stream"}},
                 "A already binds stream at line 12 (def stream)", id="a method the class defines"),
    pytest.param({"add_method": {"name": "cache", "with": "cache"}},
                 "`self.cache = ...` in a method", id="a method an instance attribute hides"),
    pytest.param({"add_attribute": {"name": "extra", "value": "2"}},
                 "A already binds extra at line 14 (`A.extra = 1`)", id="a module-level Class.attr"),
])
def test_a_member_over_an_existing_or_captured_name_is_refused(transform, why):
    status, detail = _verdict(CLASS, "A", transform)
    assert status == "not-applicable" and why in detail, detail


@pytest.mark.parametrize("transform", [
    {"add_attribute": {"name": "fresh", "value": "LIMIT + 1"}},
    {"add_method": {"name": "describe", "with": "describe"}},
])
def test_a_new_member_is_added(transform):
    assert _verdict(CLASS, "A", transform)[0] == "ok"


@pytest.mark.parametrize("body, call, status", [
    pytest.param("", "make(x, **opts)", "not-applicable", id="a parameter's keys are unknown"),
    pytest.param("", "make(x, **self.kw)", "not-applicable", id="an attribute's keys are unknown"),
    pytest.param("    kw = {'a': 1}\n    kw.update({'extra': 2})\n", "make(x, **kw)", "not-applicable",
                 id="a literal key of that name"),
    pytest.param("    kw = {}\n    kw.update({'a': 1})\n    kw['b'] = 2\n    kw.setdefault('c', 3)\n",
                 "make(x, **kw)", "ok", id="a local dict of literal keys only"),
    pytest.param("    kw = {}\n    fill(kw)\n", "make(x, **kw)", "not-applicable", id="a dict handed to other code"),
    pytest.param("    kw = {}\n    kw[name] = 1\n", "make(x, **kw)", "not-applicable", id="a computed key"),
    pytest.param("", "make(x, *rest)", "ok", id="star args"),
    pytest.param("", "make(x, key=1)", "ok", id="keywords only"),
])
def test_a_keyword_that_may_also_arrive_through_double_star_is_refused(body, call, status):
    source = f"def f(self, x, opts, rest, name):\n{body}    return {call}\n"
    got, detail = _verdict(source, "f", {"add_argument": {"call": call.split("(")[0] + "(...)", "keyword": "extra",
                                                          "value": "1"}})
    assert got == status
    if status != "ok":
        mapping = call.split("**")[1].rstrip(")")
        assert f"also passes **{mapping}, which may hold extra" in detail
        assert f"{mapping}.setdefault('extra', ...)" in detail


@pytest.mark.parametrize("source, entry, holds", [
    pytest.param("class A:\n    pass\nA.x = 1\n", "A.x", True, id="a module-level Class.attr is the class's"),
    pytest.param("class A:\n    pass\nA.x = 1\n", "A.y", False, id="another attribute is not"),
    pytest.param("try:\n    import ssl\n    E = ssl.SSLError\nexcept ImportError:\n    class E(Exception):\n"
                 "        pass\n", "E", True, id="a name bound in a try block"),
])
def test_uses_reads_the_same_bindings(source, entry, holds):
    import ast

    (_, problem), = bindings.check([entry], ast.parse(source))
    assert (problem is None) == holds, problem


def test_uses_counts_a_member_the_spec_adds():
    import ast

    spec = make_spec([target("A", {"add_attribute": {"name": "log", "value": "1"}})])
    added = bindings.spec_binds(spec)["pkg/mod.py"]
    assert bindings.check(["A.log"], ast.parse("class A:\n    pass\n"), added) == [("A.log", None)]


ALIASED = """
    class A:
        @property
        def default_name(self):
            name = self.name
            return name
        defaultName = default_name
    """


def test_a_spec_naming_both_the_alias_and_its_definition_keeps_every_edit():
    """Both names are one definition: both inserts are written (the plan rendered one name's edits in place
    of the other's before, with no conflict: pyparsing's corpus row)."""
    spec = make_spec([
        target("A.default_name", {"insert_before": {"anchor": "return name", "code": "_s.first(self)"}}, id="a"),
        target("A.defaultName", {"insert_after": {"anchor": "name = self.name", "code": "_s.second(self)"}},
               id="b")])
    text = patch(textwrap.dedent(ALIASED).lstrip(), spec)
    assert "_s.first(self)" in text and "_s.second(self)" in text, text


def test_a_rewrite_through_one_name_of_what_the_other_name_edits_is_one_conflict():
    """The two names' edits are checked against each other as one definition's (the replace would have
    dropped the other name's keyword, with exit 0)."""
    spec = make_spec([
        target("A.default_name", {"replace": {"pattern": "return str(name)", "by": "return str(name).upper()"}},
               id="a"),
        target("A.defaultName", {"add_argument": {"call": "str(name)", "keyword": "k", "value": "1"}}, id="b")])
    plan = resolve(textwrap.dedent(ALIASED.replace("return name", "return str(name)")).lstrip(), spec)
    assert not plan.errors, [r.detail for r in plan.errors]
    with pytest.raises(ConflictError, match=r"a#0 \(replace, line 5\) rewrites the code that b#0 \(add_argument"):
        emit(plan, [spec])
