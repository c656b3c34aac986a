"""Before/after pairs for every transform kind, on sources in many shapes.

The expected text is written out in full: the output must keep the file's own formatting byte for byte
outside the inserted lines.
"""
from __future__ import annotations

import textwrap

import pytest

from patchspec.compiler.edits import ConflictError
from patchspec.compiler.plan import emit
from tests.compiler.helpers import make_spec, patch, resolve, target

IMPORT = "from _patchspec_runtime import snips as _s  # patchspec: demo\n"


def d(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


CASES = [
    pytest.param(
        "f", {"insert_before": {"anchor": "y = g(...)", "code": "_s.before(x)"}},
        """
        import os

        def f(x):
            # compute
            y = g(x, 1)
            return y
        """,
        """
        import os
        {IMPORT}
        def f(x):
            # compute
            _s.before(x)  # patchspec: demo
            y = g(x, 1)
            return y
        """, id="insert_before-keeps-comment-above"),
    pytest.param(
        "f", {"insert_after": {"anchor": "y = g(...)", "code": "y = _s.after(y)"}},
        """
        def f(x):
            y = g(x,
                  1)   # odd layout
            return y
        """,
        """
        {IMPORT}def f(x):
            y = g(x,
                  1)   # odd layout
            y = _s.after(y)  # patchspec: demo
            return y
        """, id="insert_after-multiline-anchor-no-imports"),
    pytest.param(
        "C.m", {"insert_before": {"anchor": "return inner()", "code": "_s.note(self)"}},
        '''
        """Doc."""
        from a import (b,
                       c)

        class C:
            @property
            def m(self):
                def inner():
                    return 1
                if self.x:
                    return inner()
                return None
        ''',
        '''
        """Doc."""
        from a import (b,
                       c)
        {IMPORT}
        class C:
            @property
            def m(self):
                def inner():
                    return 1
                if self.x:
                    _s.note(self)  # patchspec: demo
                    return inner()
                return None
        ''', id="insert-in-nested-block-of-decorated-method"),
    pytest.param(
        "run", {"insert_before": {"anchor": "await step(...)", "code": "await _s.hook()"}},
        """
        async def run():
            async with lock:
                await step(1)
        """,
        """
        {IMPORT}async def run():
            async with lock:
                await _s.hook()  # patchspec: demo
                await step(1)
        """, id="async-def-and-async-with"),
    pytest.param(
        "C.m", {"wrap": {"with": "dispatch"}},
        """
        class C:
            @staticmethod
            @cache
            def m(a, b=2):  # trailing
                return a
        """,
        """
        {IMPORT}class C:
            @staticmethod
            @cache
            @_s.dispatch  # patchspec: demo
            def m(a, b=2):  # trailing
                return a
        """, id="wrap-innermost-decorator"),
    pytest.param(
        "f", {"add_argument": {"call": "self.model.forward(...)", "keyword": "extra", "value": "_s.extra(self)"}},
        """
        def f(self):
            out = self.model.forward(a=1,
                                     b=2,
                                     *rest)
            return out
        """,
        """
        {IMPORT}def f(self):
            out = self.model.forward(a=1,
                                     b=2,
                                     *rest,
                                     extra=_s.extra(self))
            return out
        """, id="add_argument-multiline-layout"),
    pytest.param(
        "f", {"add_argument": {"call": "g(x)", "keyword": "k", "value": "_s.v()"}},
        """
        def f(x):
            return g(x) + h(x)
        """,
        """
        {IMPORT}def f(x):
            return g(x, k=_s.v()) + h(x)
        """, id="add_argument-one-line"),
    pytest.param(
        "f", {"add_argument": {"call": "g()", "keyword": "k", "value": "1"}},
        """
        def f():
            g(
            )
        """,
        """
        {IMPORT}def f():
            g(
            k=1)
        """, id="add_argument-no-arguments"),
    pytest.param(
        "f", {"loop_guard": {"loop": "while i < len(q): ...", "code": "if _s.full(i): break"}},
        """
        def f(q):
            i = 0
            while i < len(q):
                # first
                item = q[i]
                i += 1
            for x in q: pass
        """,
        """
        {IMPORT}def f(q):
            i = 0
            while i < len(q):
                if _s.full(i): break  # patchspec: demo
                # first
                item = q[i]
                i += 1
            for x in q: pass
        """, id="loop_guard-while"),
    pytest.param(
        "f", {"loop_guard": {"loop": "for req in self.running:\n    x = req\n    ...",
                             "code": "_s.seen(req)"}},
        """
        def f(self):
        \tfor req in self.running:
        \t\tx = req
        \t\ty = x
        """,
        """
        {IMPORT}def f(self):
        \tfor req in self.running:
        \t\t_s.seen(req)  # patchspec: demo
        \t\tx = req
        \t\ty = x
        """, id="loop_guard-for-tabs"),
    pytest.param(
        "C", {"add_method": {"name": "__iter__", "with": "iter_keys"}},
        """
        class C:
            x = 1

            def keys(self):
                return []
        # after
        y = 2
        """,
        """
        {IMPORT}class C:
            x = 1

            def keys(self):
                return []

            __iter__ = _s.iter_keys  # patchspec: demo
        # after
        y = 2
        """, id="add_method-end-of-class-spaced-like-its-methods"),
    pytest.param(
        "Outer.Inner", {"add_attribute": {"name": "flag", "value": "True"}},
        """
        class Outer:
            class Inner:
                  a = 1
        """,
        """
        {IMPORT}class Outer:
            class Inner:
                  a = 1
                  flag = True  # patchspec: demo
        """, id="add_attribute-nested-class-odd-indent"),
    pytest.param(
        "f", {"add_import": {"import": "import functools"}},
        '''
        """Module doc."""
        from __future__ import annotations
        import os
        X = 1
        def f():
            pass
        ''',
        '''
        """Module doc."""
        from __future__ import annotations
        import os
        {IMPORT}import functools  # patchspec: demo
        X = 1
        def f():
            pass
        ''', id="add_import-after-leading-imports"),
]


@pytest.mark.parametrize("function, transform, before, after", CASES)
def test_before_after(function, transform, before, after):
    spec = make_spec([target(function, transform)])
    expected = d(after).replace("{IMPORT}", IMPORT)
    assert patch(d(before), spec) == expected
    compile(expected, "out.py", "exec")


def test_crlf_file_keeps_its_line_endings():
    source = "def f():\r\n    x = 1\r\n    return x\r\n"
    spec = make_spec([target("f", {"insert_before": {"anchor": "return x", "code": "_s.h()"}})])
    out = patch(source, spec)
    assert out == ("from _patchspec_runtime import snips as _s  # patchspec: demo\r\n"
                   "def f():\r\n    x = 1\r\n    _s.h()  # patchspec: demo\r\n    return x\r\n")


def test_a_file_whose_lines_end_in_cr_alone_is_refused_not_patched_out_of_order():
    # every line of it was counted as the definition's first: the insertion after line 2 was taken to run
    # after the one before line 4, and read the name that one binds
    source = "def f(a):\r    x = (1,\r    2)\r    return x\r"
    spec = make_spec([target("f", {"insert_before": {"anchor": "return x", "code": "n = 1"}},
                             {"insert_after": {"anchor": "x = (1, 2)", "code": "print(n)"}})])
    assert [(str(r.status), r.detail) for r in resolve(source, spec).resolved] == [
        ("unparsable", "pkg/mod.py:1: this line ends in CR alone: patchspec patches files whose lines end in LF or "
                       "CRLF; convert the file's line endings first")] * 2


def test_file_without_final_newline():
    source = "def f():\n    return 1"
    spec = make_spec([target("f", {"insert_before": {"anchor": "return 1", "code": "_s.h()"}})])
    assert patch(source, spec) == (IMPORT + "def f():\n    _s.h()  # patchspec: demo\n    return 1")


def test_several_transforms_on_one_target_apply_in_order():
    spec = make_spec([target("f",
                             {"insert_before": {"anchor": "b()", "code": "_s.one()"}},
                             {"insert_before": {"anchor": "b()", "code": "_s.two()"}},
                             {"insert_after": {"anchor": "b()", "code": "_s.three()"}})])
    out = patch("def f():\n    a()\n    b()\n", spec)
    assert out == IMPORT + ("def f():\n    a()\n    _s.one()  # patchspec: demo\n"
                            "    _s.two()  # patchspec: demo\n    b()\n    _s.three()  # patchspec: demo\n")


def test_only_the_target_definition_is_touched():
    source = "def g():\n    b()\n\ndef f():\n    b()\n"
    spec = make_spec([target("f", {"insert_before": {"anchor": "b()", "code": "_s.h()"}})])
    assert patch(source, spec) == IMPORT + "def g():\n    b()\n\ndef f():\n    _s.h()  # patchspec: demo\n    b()\n"


def test_add_import_of_an_import_the_file_has_adds_nothing():
    source = "import os\nfrom a import (b,\n    c)\n\ndef f():\n    return 1\n"
    spec = make_spec([target("f", {"add_import": {"import": "from a import b, c"}},
                             {"add_import": {"import": "import os"}})])
    plan = resolve(source, spec)
    assert [(r.ok, r.edits, r.note) for r in plan.resolved] == [(True, [], "already imported at line 2"),
                                                              (True, [], "already imported at line 1")]
    assert plan.files == [] and emit(plan, [spec]) == {}


def test_a_method_added_to_a_class_without_blank_lines_between_methods_gets_none():
    source = "class C:\n    def a(self):\n        pass\n    def b(self):\n        pass\n"
    spec = make_spec([target("C", {"add_method": {"name": "c", "with": "hook"}})])
    assert patch(source, spec).endswith("        pass\n    c = _s.hook  # patchspec: demo\n")


NESTED = d("""
    class K:
        def f(self, a):
            def g(b):
                return other(b)
            return g
    """)


@pytest.mark.parametrize("outer, inner", [
    pytest.param(target("K.f", {"insert_before": {"anchor": "return g", "code": "print(g)"}}, id="outer"),
                 target("K.f.g", {"insert_before": {"anchor": "return other(b)", "code": "print(b)"}}, id="inner"),
                 id="a function inside a patched function"),
    pytest.param(target("K.f", {"wrap": {"with": "w"}}, id="outer"),
                 target("K.f.g", {"wrap": {"with": "w2"}}, id="inner"), id="two wraps"),
])
def test_a_patched_definition_inside_another_patched_one_is_a_conflict_not_a_lost_edit(outer, inner):
    spec = make_spec([outer, inner])
    resolved = resolve(NESTED, spec)
    assert all(r.ok and r.edits for r in resolved.resolved)
    with pytest.raises(ConflictError, match="the definition at line 3 that a transform patches lies inside the "
                                            "definition at lines 2-5"):
        emit(resolved, [spec])


def test_a_name_targeted_in_two_branches_patches_each_its_own_definition():
    """Definitions were by file and name: the second target's edits landed in the first branch's
    definition, then (f49a960) the second was refused; each now has its own."""
    source = d("""
        if FLAG:
            def f(a):
                return a
        else:
            def f(a):
                return a
        """)
    first, second = (target("f", {"insert_before": {"anchor": "return a", "code": f"print({n})"}}, id=f"t{n}")
                     for n in (1, 2))
    first["branch"], second["branch"] = "if FLAG", "else"
    spec = make_spec([first, second])
    resolved = resolve(source, spec)
    assert [(r.target, str(r.status)) for r in resolved.resolved] == [("t1", "ok"), ("t2", "ok")]
    out = emit(resolved, [spec])["pkg/mod.py"]
    first_def, second_def = out.split("else:")
    assert "print(1)" in first_def and "print(2)" not in first_def
    assert "print(2)" in second_def and "print(1)" not in second_def
