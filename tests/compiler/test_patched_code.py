"""The patched code does what the spec says, or the spec is refused saying where: each case is one where
patchspec once said "applied" and the patched code did the wrong thing (or the error did not say where),
and each test failed before its change; ``test_control_*`` (and the same-quote case of the quote style)
pass before and after: they show the checks do not refuse good specs and that what already held still
holds. Each runs the real compiler and, where the case is about apply, the real verbs on a root in a
temporary directory."""
from __future__ import annotations

import codecs
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from patchspec.cli.present import plan_line
from patchspec.errors import PatchspecError
from patchspec.prepare import prepare
from patchspec.verbs import reading, writing
from tests.compiler.helpers import FILE, make_spec, patch, resolve, target

SNIPS = '''
import functools


def logged(fn):
    @functools.wraps(fn)
    def inner(*args, **kwargs):
        CALLS.append(fn.__name__)
        return fn(*args, **kwargs)
    return inner


def timed(fn):
    @functools.wraps(fn)
    def inner(*args, **kwargs):
        CALLS.append("timed:" + fn.__name__)
        return fn(*args, **kwargs)
    return inner


def note(*args):
    CALLS.append(args)


def describe(self):
    return "K!"


def no_self():
    return None


def two_functions(fn, other):
    return fn


CALLS = []
'''


class Lab:
    """A root with ``pkg/`` and a spec directory with the snippet package ``snips``."""

    def __init__(self, tmp: Path) -> None:
        self.tmp, self.root = tmp, tmp / "root"
        (self.root / "pkg").mkdir(parents=True)
        (self.root / "pkg" / "__init__.py").write_text("")
        for name in ("snips", "other"):
            (tmp / "spec" / name).mkdir(parents=True)
            (tmp / "spec" / name / "__init__.py").write_text(SNIPS)
        (tmp / "spec" / "releases").mkdir()
        (tmp / "spec" / "releases" / "r1.yaml").write_text("release: r1\npackages: {pkg: '>=0'}\n")

    def source(self, text: str | bytes, rel: str = "pkg/mod.py") -> None:
        data = text if isinstance(text, bytes) else textwrap.dedent(text).lstrip("\n").encode()
        (self.root / rel).write_bytes(data)

    def spec(self, targets: str, name: str = "demo", alias: str = "_s", package: str = "snips",
             extra: str = "") -> str:
        path = self.tmp / "spec" / f"{name}.yaml"
        path.write_text(f"spec: 1\nname: {name}\nsummary: t\n{extra}"
                        f"snippets: {{package: {package}, alias: {alias}, path: .}}\n"
                        f"targets:\n{textwrap.dedent(targets)}")
        return str(path)

    def send_spec(self, transform: str, **spec_args) -> str:
        """``pkg/mod.py`` holding ``BODY``, and a spec of one transform of its ``send``."""
        self.source(BODY)
        return self.spec(f"""
      - id: send
        file: pkg/mod.py
        function: send
        transforms:
          - {transform}
    """, **spec_args)

    def apply(self, spec: str) -> None:
        writing.apply(spec, "r1", str(self.root))

    def run(self, code: str) -> str:
        """Run ``code`` in a fresh interpreter with the root importable: the patched package for real."""
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=self.root, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()


@pytest.fixture
def lab(tmp_path) -> Lab:
    return Lab(tmp_path)


def refusal(spec: str, lab: Lab) -> str:
    with pytest.raises(PatchspecError) as info:
        lab.apply(spec)
    assert "\n" not in str(info.value)
    return str(info.value)


# --- 1. typing.overload stubs ------------------------------------------------------------------------

OVERLOADED = """
    import typing
    from typing import overload


    class BaseCommand:
        @overload
        def main(self, args: int) -> int: ...

        @typing.overload
        def main(self, args: str) -> str: ...

        def main(self, args):
            rv = args * 2
            return rv
"""


def test_wrap_and_anchor_reach_the_live_definition_not_the_overload_stub(lab):
    lab.source(OVERLOADED)
    spec = lab.spec("""
      - id: main
        file: pkg/mod.py
        function: BaseCommand.main
        transforms:
          - wrap: {with: logged}
          - insert_before: {anchor: "return rv", code: "_s.note(rv)"}
    """)
    prepared = prepare(spec, "r1", str(lab.root))
    assert [r.line for r in prepared.plan.resolved] == [12, 14]
    assert "2 @overload stubs of main skipped" in plan_line(prepared.plan.resolved[0])
    lab.apply(spec)
    out = lab.run("""
        from pkg.mod import BaseCommand
        from _patchspec_runtime.snips import CALLS
        print(BaseCommand().main(3), CALLS)
    """)
    assert out == "6 ['main', (6,)]"


def test_the_last_definition_at_a_level_is_live(lab):
    resolved = resolve(textwrap.dedent("""
        def f():
            return 1


        def f():
            return 2
    """).lstrip(), make_spec([target("f", {"insert_before": {"anchor": "return ...", "code": "_s.note()"}})]))
    row, = resolved.resolved
    assert row.ok and row.line == 6 and "the last at its level (line 5) is live" in row.note


# --- 2. one-line bodies, form feeds and U+2028 ------------------------------------------------------

def test_add_method_on_a_one_line_class_lands_in_the_class(lab):
    lab.source("""
        class K: pass
        x = 1
    """)
    lab.apply(lab.spec("""
      - id: k
        file: pkg/mod.py
        function: K
        transforms:
          - add_method: {name: describe, with: describe}
    """))
    assert lab.run("from pkg.mod import K; print(K().describe())") == "K!"


def test_one_line_function_body_takes_an_insertion():
    spec = make_spec([target("f", {"insert_before": {"anchor": "return g(x)", "code": "_s.note(x)"}})])
    patched = patch("def f(x): return g(x)\n", spec)
    assert "def f(x):\n    _s.note(x)  # patchspec: demo\n    return g(x)\n" in patched


@pytest.mark.parametrize("odd", ["\f", "\u2028", "\x1c", "\x85"])
def test_form_feed_and_unicode_separators_do_not_shift_edits(lab, odd):
    lab.source(f'''
        """Doc {odd} string."""
        from os import (
            path,
        )
        TEXT = "a{odd}b"
        # a comment {odd} with it
        \f
        class K:
            def m(self, x):
                y = x + 1
                return y
    '''.replace("{odd}", odd))
    lab.apply(lab.spec("""
      - id: k
        file: pkg/mod.py
        function: K.m
        transforms:
          - insert_after: {anchor: "y = x + 1", code: "_s.note(y)"}
      - id: cls
        file: pkg/mod.py
        function: K
        transforms:
          - add_attribute: {name: flag, value: "True"}
    """))
    assert lab.run("""
        from pkg.mod import K
        from _patchspec_runtime.snips import CALLS
        print(K().m(1), K.flag, CALLS)
    """) == "2 True [(2,)]"


# --- 3. quote style -----------------------------------------------------------------------------------

@pytest.mark.parametrize("written", ["'Content-Length'", '"Content-Length"', "'Content-' \"Length\"",
                                     "(\n        'Content-Length'\n    )", "r'Content-Length'"])
def test_anchors_match_strings_by_value(written):
    source = f"def prepare(headers, n):\n    headers[{written}] = str(n)\n    return headers\n"
    spec = make_spec([target("prepare", {"insert_after": {"anchor": 'headers["Content-Length"] = str(n)',
                                                          "code": "_s.note(headers)"}})])
    assert "_s.note(headers)  # patchspec: demo" in patch(source, spec)


def test_numbers_by_value_and_the_fingerprint_agrees():
    from patchspec.compiler import fingerprint
    from patchspec.compiler.source import SourceFile
    spec = make_spec([target("f", {"insert_before": {"anchor": "return x + 16", "code": "_s.note(x)"}})])
    assert "_s.note(x)" in patch("def f(x):\n    return x + 0x10\n", spec)
    prints = set()
    for text in ["def f():\n    return 'ab' + 0x10\n", 'def f():\n    return ("a"\n            "b") + 16\n']:
        source = SourceFile(FILE, text)
        prints.add(fingerprint.of_definition(source, source.find("f")))
    assert len(prints) == 1


# --- 4. inserted code checked before anything is written --------------------------------------------

BODY = """
    import os


    class TooManyRedirects(Exception):
        pass


    def send(prep, limit):
        resp = prep.go()
        for hop in range(limit):
            resp = resp.next()
        return resp
"""


@pytest.mark.parametrize("code, anchor, why", [
    ("_rx.note(resp)", "return resp", "send:12: _rx"),
    ("_s.note(prepp)", "return resp", "prepp (did you mean prep?)"),
    ("raise TooManyRedirectz()", "return resp", "TooManyRedirectz (did you mean TooManyRedirects?)"),
    ("_s.note(later)", "resp = prep.go()", "later"),
    ("break", "return resp", "'break' outside loop"),
    ("yield resp", "return resp", "would turn send into a generator"),
])
def test_inserted_code_that_would_fail_at_run_time_is_refused(lab, code, anchor, why):
    lab.source(BODY + "        later = 1\n")
    spec = lab.spec(f"""
      - id: send
        file: pkg/mod.py
        function: send
        transforms:
          - insert_before: {{anchor: "{anchor}", code: "{code}"}}
    """)
    before = (lab.root / "pkg/mod.py").read_bytes()
    message = refusal(spec, lab)
    assert why in message and "nothing was written" in message
    assert message.startswith(f"{spec}:11:"), message        # the transform in the spec
    assert "pkg/mod.py:" in message                           # and the source line
    assert (lab.root / "pkg/mod.py").read_bytes() == before
    assert not (lab.root / "_patchspec_runtime").exists()


def test_control_names_bound_where_the_code_lands_are_accepted(lab):
    lab.source(BODY)
    lab.apply(lab.spec("""
      - id: send
        file: pkg/mod.py
        function: send
        transforms:
          - loop_guard: {loop: "for hop in range(limit): ...", code: "if _s.note(hop, resp, os.sep): break"}
          - insert_before: {anchor: "return resp", code: "_s.note(prep, limit, len(str(TooManyRedirects)))"}
    """))


def test_add_method_hook_without_self_is_refused(lab):
    lab.source("class K:\n    pass\n")
    spec = lab.spec("""
      - id: k
        file: pkg/mod.py
        function: K
        transforms:
          - add_method: {name: nothing, with: no_self}
    """)
    message = refusal(spec, lab)
    assert "first parameter must take the instance" in message and message.startswith(f"{spec}:11:")


def test_control_a_wrap_hook_that_is_not_a_decorator_of_one_function_is_refused(lab):
    spec = lab.send_spec('wrap: {with: two_functions}')
    message = refusal(spec, lab)
    assert "_s.two_functions(fn, other): missing a required argument: 'other'" in message
    assert message.startswith(f"{spec}:11:")


@pytest.mark.parametrize("alias, code, why", [
    pytest.param("resp", "resp.note()", "the snippet alias resp is also a local name of send",
                 id="an alias that is a local of the target"),
    pytest.param("os", "os.note(resp)", "the snippet alias os would shadow os",
                 id="an alias that shadows a module name"),
])
def test_an_alias_that_names_something_else_where_the_code_lands_is_refused(lab, alias, code, why):
    spec = lab.send_spec(f'insert_before: {{anchor: "return resp", code: "{code}"}}', alias=alias)
    assert why in refusal(spec, lab)


def test_two_specs_with_one_alias_for_different_packages_are_refused(lab):
    lab.source(BODY)
    targets = """
      - id: send
        file: pkg/mod.py
        function: send
        transforms:
          - insert_before: {anchor: "return resp", code: "_s.note(resp)"}
    """
    lab.apply(lab.spec(targets, name="first"))
    before = (lab.root / "pkg/mod.py").read_bytes()
    message = refusal(lab.spec(targets, name="second", package="other"), lab)
    assert "specs first and second both use the alias _s in pkg/mod.py, for different packages" in message
    assert (lab.root / "pkg/mod.py").read_bytes() == before


# --- 5. stacking --------------------------------------------------------------------------------------

STACKED = """
  - id: send
    file: pkg/mod.py
    function: send
    transforms:
      - wrap: {with: %s}
      - insert_after: {anchor: "resp = prep.go()", code: "_s.note('%s')"}
"""


def test_two_specs_wrap_one_function_and_insert_at_one_anchor(lab):
    lab.source(BODY)
    timeout = lab.spec(STACKED % ("timed", "timeout"), name="timeout")
    logger = lab.spec(STACKED % ("logged", "logger"), name="logger", extra="order: -1\n")
    lab.apply(timeout)
    lab.apply(logger)
    # logger has the lower order: its wrapper is innermost and its statement comes first
    out = lab.run("""
        from pkg.mod import send
        from _patchspec_runtime.snips import CALLS
        class P:
            def go(self): return self
            def next(self): return self
        send(P(), 1)
        print(CALLS)
    """)
    assert out == "['timed:send', 'send', ('logger',), ('timeout',)]"
    both = (lab.root / "pkg/mod.py").read_text()
    writing.unapply("timeout", str(lab.root))
    only_logger = (lab.root / "pkg/mod.py").read_text()
    writing.unapply("logger", str(lab.root))
    lab.apply(logger)
    assert (lab.root / "pkg/mod.py").read_text() == only_logger
    lab.apply(timeout)
    assert (lab.root / "pkg/mod.py").read_text() == both


def test_two_values_for_one_keyword_are_refused_naming_both_specs(lab):
    lab.source("def f(x):\n    return g(x, 1)\n")
    first = lab.spec("""
      - id: f
        file: pkg/mod.py
        function: f
        transforms:
          - add_argument: {call: "g(x, ...)", keyword: timeout, value: "3"}
    """, name="first")
    second = first.replace("first", "second")
    Path(second).write_text(Path(first).read_text().replace("first", "second").replace('"3"', '"5"'))
    lab.apply(first)
    message = refusal(second, lab)
    assert "specs first (f#0) and second (f#0) set timeout= differently ('3' and '5')" in message
    assert message.startswith(f"{first}:11:") and f"{second}:11:" in message


def test_the_same_value_twice_is_kept_once(lab):
    lab.source("def f(x):\n    return g(x, 1)\n")
    text = """
      - id: f
        file: pkg/mod.py
        function: f
        transforms:
          - add_argument: {call: "g(x, ...)", keyword: timeout, value: "3"}
    """
    lab.apply(lab.spec(text, name="first"))
    lab.apply(lab.spec(text, name="second"))
    assert "g(x, 1, timeout=3)\n" in (lab.root / "pkg/mod.py").read_text()


# --- 6. errors at the spec's position -----------------------------------------------------------------

def test_a_missing_anchor_names_the_spec_line_and_the_source(lab):
    spec = lab.send_spec('insert_before: {anchor: "return nothing", code: "_s.note()"}')
    message = refusal(spec, lab)
    assert message.startswith(f"{spec}:11:") and "anchor 'return nothing': missing" in message
    assert message.endswith("(see pkg/mod.py:8)")   # the target's line: the anchor is not in it


def test_an_ambiguous_anchor_names_both_places(lab):
    spec = lab.send_spec('insert_before: {anchor: "resp = ...", code: "_s.note()"}')
    message = refusal(spec, lab)
    assert message.startswith(f"{spec}:11:") and "ambiguous (lines 9, 11)" in message
    assert "pkg/mod.py:9" in message


def test_an_unknown_snippet_package_names_the_real_path(lab):
    spec = lab.send_spec('wrap: {with: logged}', package="nosuch")
    message = refusal(spec, lab)
    assert str(lab.tmp / "spec" / "nosuch" / "__init__.py") in message and message.startswith(f"{spec}:4:")


def test_a_misspelt_function_gets_did_you_mean(lab):
    lab.source(BODY)
    spec = lab.spec("""
      - id: send
        file: pkg/mod.py
        function: sned
        transforms:
          - wrap: {with: logged}
    """)
    assert "did you mean send?" in refusal(spec, lab)


# --- 7. if/try branches, BOM and coding cookies -------------------------------------------------------

BRANCHES = """
    import sys
    from typing import TYPE_CHECKING

    if TYPE_CHECKING:
        def helper(x) -> int: ...
    elif sys.version_info >= (3, 11):
        def helper(x):
            return x + 1
    else:
        def helper(x):
            return x + 2

    try:
        from fastjson import loads
    except ImportError:
        def loads(text):
            return text
"""


def test_a_target_in_one_branch_is_found(lab):
    """Its try branch binds the name too (issue 20: the fallback may not be what runs): chosen by branch."""
    lab.source(BRANCHES)
    targets = """
      - id: loads
        file: pkg/mod.py
        function: loads
        %s
        transforms:
          - wrap: {with: logged}
    """
    assert "try (line 14: `from fastjson import loads`), except ImportError (line 16: def loads)" in refusal(
        lab.spec(targets % ""), lab)
    lab.apply(lab.spec(targets % "branch: except ImportError"))
    assert lab.run("from pkg.mod import loads; from _patchspec_runtime.snips import CALLS; "
                   "print(loads('t'), CALLS)") == "t ['loads']"


def test_several_branches_need_a_selector(lab):
    lab.source(BRANCHES)
    targets = """
      - id: helper
        file: pkg/mod.py
        function: helper
        %s
        transforms:
          - insert_before: {anchor: "return ...", code: "_s.note(x)"}
    """
    message = refusal(lab.spec(targets % ""), lab)
    assert ("helper is defined in several branches: if TYPE_CHECKING (line 5), if sys.version_info >= (3, 11) "
            "(line 7), else (line 10); choose one with `branch:`") in message
    lab.apply(lab.spec(targets % "branch: 'if sys.version_info >= (3, 11)'"))
    assert lab.run("from pkg.mod import helper; from _patchspec_runtime.snips import CALLS; "
                   "print(helper(1), CALLS)") == "2 [(1,)]"


@pytest.mark.parametrize("head, encoding", [(codecs.BOM_UTF8, "utf-8"),
                                            (b"# -*- coding: latin-1 -*-\n", "latin-1")])
def test_bom_and_coding_cookie_are_read_and_written_back(lab, head, encoding):
    text = 'NAME = "caf\u00e9"\n\n\ndef f(x):\n    return x\n'
    original = head + text.encode(encoding)
    lab.source(original)
    spec = lab.spec("""
      - id: f
        file: pkg/mod.py
        function: f
        transforms:
          - insert_before: {anchor: "return x", code: "_s.note(x)"}
    """)
    assert reading.check(spec, "r1", str(lab.root)).code == 1
    lab.apply(spec)
    assert reading.check(spec, "r1", str(lab.root)).code == 0
    patched = (lab.root / "pkg/mod.py").read_bytes()
    assert patched.startswith(head) and "caf\u00e9".encode(encoding) in patched
    assert lab.run("from pkg.mod import f, NAME; print(f(1), NAME == 'caf\\u00e9')") == "1 True"
    writing.unapply("demo", str(lab.root))
    assert (lab.root / "pkg/mod.py").read_bytes() == original
