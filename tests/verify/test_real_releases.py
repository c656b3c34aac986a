"""Issue 27's trials on the real releases (items 1, 2, 3, 12), installed by pip with their compiled
modules: markupsafe's ``_speedups`` accelerator, charset-normalizer's mypyc ``md`` module, httpx's
re-homed classes and black-style signatures."""
from __future__ import annotations

from pathlib import Path

import pytest

from patchspec.cli import main
from tests.state.toy import tree
from tests.verify.real_venv import pip_venv
from tests.verify_toy import SNIPPET, run, write_spec


def _spec(tmp_path: Path, text: str, package: str, version: str) -> str:
    spec = write_spec(tmp_path / "spec", text, SNIPPET, package=package)
    (tmp_path / "spec" / "releases" / "r1.yaml").write_text(f"release: r1\npackages: {{{package}: '=={version}'}}\n")
    return spec


WRAP = '''spec: 1
name: vtoy
summary: A hook on markupsafe's pure escape.
snippets: {{package: vsnips, alias: _v, path: snips}}
targets:
  - id: escape
    file: markupsafe/_native.py
    function: {function}
    transforms:
      - wrap: {{with: traced}}
'''


@pytest.mark.parametrize(("version", "function"), [("2.1.5", "escape"), ("3.0.2", "_escape_inner")])
def test_markupsafe_runs_speedups_so_a_wrap_of_native_is_not_live(tmp_path, capsys, version, function):
    """Before: "verified: 1 live", and markupsafe.escape, Markup.escape, format and % all ran _speedups."""
    python, site = pip_venv(tmp_path / "venv", f"markupsafe=={version}")
    if not list((site / "markupsafe").glob("_speedups*.so")):
        pytest.skip("no _speedups wheel for this interpreter")
    spec = _spec(tmp_path, WRAP.format(function=function), "markupsafe", version)
    before = tree(site)
    assert main(["apply", spec, "--root", str(site)]) == 2
    err = capsys.readouterr().err
    so = next((site / "markupsafe").glob("_speedups*.so"))
    assert (f"markupsafe.{function} is markupsafe._speedups.{function} (compiled: {so}): a patch of "
            f"_native.{function} does not run for callers of markupsafe.{function}") in err
    assert "--no-verify" not in err
    assert tree(site) == before


MD = '''spec: 1
name: vtoy
summary: A hook in charset-normalizer's mess_ratio.
snippets: {package: vsnips, alias: _v, path: snips}
targets:
  - id: ratio
    file: charset_normalizer/md.py
    function: mess_ratio
    transforms:
      - insert_before: {anchor: "length: int = len(decoded_sequence) + 1", code: "_v.seen('ratio')"}
'''


def test_charset_normalizer_md_is_the_mypyc_module_and_the_refusal_names_it(tmp_path, capsys):
    """Before: "the live mess_ratio does not lead to the definition", the .so unnamed, advice --no-verify."""
    python, site = pip_venv(tmp_path / "venv", "charset-normalizer==3.4.0")
    compiled = list((site / "charset_normalizer").glob("md.cpython-*.so"))
    if not compiled:
        pytest.skip("no mypyc wheel of charset-normalizer for this interpreter")
    spec = _spec(tmp_path, MD, "charset_normalizer", "3.4.0")
    capsys.readouterr()
    assert main(["compile", spec, "--root", str(site)]) == 0
    assert f"charset_normalizer/{compiled[0].name} is a compiled module beside it" in capsys.readouterr().out
    assert main(["apply", spec, "--root", str(site)]) == 2
    err = capsys.readouterr().err
    assert f"charset_normalizer.md is imported from {compiled[0]}, a compiled module beside md.py" in err
    assert "--no-verify" not in err


HTTPX = '''spec: 1
name: vtoy
summary: A member of httpx.Response and a new default of httpx.request.
snippets: {package: vsnips, alias: _v, path: snips}
targets:
  - id: response
    file: httpx/_models.py
    function: Response
    transforms:
      - add_method: {name: describe, with: describe}
  - id: request
    file: httpx/_api.py
    function: request
    transforms:
      - set: {parameter: follow_redirects, value: "True"}
'''


def test_httpx_0_28_1_rehomed_class_and_multi_line_default_are_live(tmp_path, capsys):
    """Before: "the live httpx._models.Response is httpx.Response, defined elsewhere" and "line(s) 53 carry
    no code in the live httpx._api.request": apply undid both though both work."""
    python, site = pip_venv(tmp_path / "venv", "httpx==0.28.1")
    spec = _spec(tmp_path, HTTPX, "httpx", "0.28.1")
    assert main(["apply", spec, "--root", str(site)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "verified: 2 live" in out
    assert run(python, code="import httpx; print(httpx.Response(200).describe(), "
                            "httpx.request.__kwdefaults__['follow_redirects'])") == ["described True"]


YARL = '''spec: 1
name: vtoy
summary: A hook in yarl's pure quoter.
snippets: {package: vsnips, alias: _v, path: snips}
targets:
  - id: quoter
    file: yarl/_quoting_py.py
    function: _Quoter.__call__
    transforms:
      - wrap: {with: traced}
'''


def test_yarl_quoting_py_is_chosen_by_a_sibling_module_and_init_warns_of_it(tmp_path, capsys):
    """``yarl/_quoting.py`` imports ``_Quoter`` from ``_quoting_c`` (Cython) in a try, from ``_quoting_py``
    only where that fails. Before: init and compile gave no warning."""
    python, site = pip_venv(tmp_path / "venv", "yarl==1.9.4")
    compiled = list((site / "yarl").glob("_quoting_c.cpython-*.so"))
    if not compiled:
        pytest.skip("no compiled yarl wheel for this interpreter")
    assert main(["init", "yarl-fix", "--root", str(site), "--target", "yarl/_quoting_py.py:_Quoter.__call__",
                 "--dir", str(tmp_path / "fix")]) == 0
    assert ("yarl._quoting._Quoter is bound in try by `from ._quoting_c import _Quoter, _Unquoter`, and from "
            "yarl._quoting_py only in except ImportError") in capsys.readouterr().out
    spec = _spec(tmp_path, YARL, "yarl", "1.9.4")
    before = tree(site)
    assert main(["apply", spec, "--root", str(site)]) == 2
    err = capsys.readouterr().err
    assert f"yarl._quoting._Quoter is yarl._quoting_c._Quoter (compiled: {compiled[0]})" in err, err
    assert "--no-verify" not in err
    assert tree(site) == before


RAPIDFUZZ = '''spec: 1
name: vtoy
summary: A hook in rapidfuzz's pure ratio.
snippets: {package: vsnips, alias: _v, path: snips}
targets:
  - id: ratio
    file: rapidfuzz/fuzz_py.py
    function: ratio
    transforms:
      - wrap: {with: traced}
'''


def test_rapidfuzz_fuzz_ratio_is_a_cython_function_and_the_row_says_its_callers_run_it(tmp_path, capsys):
    """A spec written from the docs for a package no test used (the review of session 7):
    ``rapidfuzz.fuzz.ratio`` is ``fuzz_cpp_avx2.ratio``, a Cython function, which has a ``__code__`` of its own.
    Before: "verified: 1 live" with no word that callers of rapidfuzz.fuzz.ratio run compiled code."""
    python, site = pip_venv(tmp_path / "venv", "rapidfuzz==3.14.6")
    if not list((site / "rapidfuzz").glob("fuzz_cpp*.so")):
        pytest.skip("no compiled rapidfuzz wheel for this interpreter")
    spec = _spec(tmp_path, RAPIDFUZZ, "rapidfuzz", "3.14.6")
    assert main(["apply", spec, "--root", str(site)]) == 0, capsys.readouterr().err
    assert main(["verify", spec, "--root", str(site)]) == 0
    out = capsys.readouterr().out
    assert "callers of rapidfuzz.fuzz.ratio reach rapidfuzz.fuzz_cpp" in out, out
    assert run(python, code="import rapidfuzz.fuzz_py as p; print(p.ratio('ab', 'ab'))") == ["HOOK wrap", "100.0"]
    assert run(python, code="import rapidfuzz.fuzz as f; print(f.ratio('ab', 'ab'))") == ["100.0"]
