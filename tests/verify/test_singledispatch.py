"""singledispatch handlers registered as ``_`` (issue 27, item 6): any of them can be named (by the type
it registers, or by position), a refusal says ``_`` is defined several times and how to choose, and the
proof reaches the handler through the dispatcher's registry, where dispatch finds it."""
from __future__ import annotations

import pytest

from patchspec.cli import main
from tests.verify_toy import SNIPPET, install, make_venv, run, write_spec

MOD = '''import functools


@functools.singledispatch
def fmt(x):
    return "obj"


@fmt.register(int)
def _(x):
    return "int"


@fmt.register
def _(x: str):
    return "str"
'''

SPEC = '''spec: 1
name: vtoy
summary: A hook in the int handler.
snippets: {{package: vsnips, alias: _v, path: snips}}
targets:
  - id: handler
    file: vpkg/mod.py
    function: _
{branch}    transforms:
      - insert_before: {{anchor: 'return "int"', code: "_v.seen('int')"}}
'''


@pytest.mark.parametrize("branch", ["register(int)", "definition 1"])
def test_a_handler_that_is_not_the_last_underscore_is_named_and_live(tmp_path, capsys, branch):
    """Before: the anchor was looked for in the last ``_`` only ("anchor-missing"), and no branch chose."""
    python, site = make_venv(tmp_path / "venv")
    install(site, {"vpkg/__init__.py": "", "vpkg/mod.py": MOD})
    spec = write_spec(tmp_path / "spec", SPEC.format(branch=f"    branch: '{branch}'\n"), SNIPPET)
    assert main(["apply", spec, "--root", str(site)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["verify", spec, "--root", str(site)]) == 0
    assert "in the live code of vpkg.mod.fmt.registry[int]" in capsys.readouterr().out
    assert run(python, code="import vpkg.mod as m; print(m.fmt(1), m.fmt('a'))") == ["HOOK int", "int str"]


def test_naming_underscore_alone_says_it_is_defined_several_times_and_how_to_choose(tmp_path, capsys):
    python, site = make_venv(tmp_path / "venv")
    install(site, {"vpkg/__init__.py": "", "vpkg/mod.py": MOD})
    spec = write_spec(tmp_path / "spec", SPEC.format(branch=""), SNIPPET)
    assert main(["apply", spec, "--root", str(site)]) == 2
    err = capsys.readouterr().err
    assert "_ is defined 2 times" in err and "register(int) at line 10" in err
    assert "`branch: register(TYPE)`" in err


BOTH = '''spec: 1
name: vtoy
summary: Hooks in both handlers.
snippets: {package: vsnips, alias: _v, path: snips}
targets:
  - id: int-handler
    file: vpkg/mod.py
    function: _
    branch: register(int)
    transforms:
      - insert_before: {anchor: 'return "int"', code: "_v.seen('int')"}
  - id: str-handler
    file: vpkg/mod.py
    function: _
    branch: register(str)
    transforms:
      - insert_before: {anchor: 'return "str"', code: "_v.seen('str')"}
'''


def test_two_underscore_handlers_in_one_spec_are_each_patched_and_live(tmp_path, capsys):
    """Before: "_ at line 15 is another branch's definition than the one at line 10 that a target already
    patches: one plan patches one definition of a name" (definitions were by file and name)."""
    python, site = make_venv(tmp_path / "venv")
    install(site, {"vpkg/__init__.py": "", "vpkg/mod.py": MOD})
    spec = write_spec(tmp_path / "spec", BOTH, SNIPPET)
    assert main(["apply", spec, "--root", str(site)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["verify", spec, "--root", str(site)]) == 0
    out = capsys.readouterr().out
    assert "in the live code of vpkg.mod.fmt.registry[int]" in out and "vpkg.mod.fmt.registry[str]" in out
    assert run(python, code="import vpkg.mod as m; print(m.fmt(1), m.fmt('a'))") == ["HOOK int", "HOOK str",
                                                                                     "int str"]
    main(["drift", spec, "--root", str(site)])   # each target's row at its own handler's anchor
    out = capsys.readouterr().out
    assert "int-handler#0 insert_before _ at vpkg/mod.py:11" in out
    assert "str-handler#0 insert_before _ at vpkg/mod.py:16" in out
