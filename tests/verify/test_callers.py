"""The proof follows callers (issue 27, item 1): a program imports the package, not the patched module,
so the names it calls (the package's re-exports) must reach the patched object. A compiled accelerator
bound in their place, or a compiled module beside the ``.py``, is not live, named, and the refusal never
offers ``--no-verify`` for code that cannot run. The extension modules are real (built by gcc)."""
from __future__ import annotations

import pytest

from patchspec.cli import main
from tests.state.toy import tree
from tests.verify.compiled import build_extension
from tests.verify_toy import install, make_venv, run, write_spec

INIT = '''try:
    from ._speedups import escape as escape
except ImportError:
    from ._native import escape as escape


def render(s):
    return escape(s)
'''

NATIVE = '''def escape(s):
    return "native:" + str(s)
'''

MD = '''def mess_ratio(s):
    return len(s)
'''

SNIPPET = '''import functools


def traced(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        print("HOOK", fn.__name__)
        return fn(*args, **kwargs)
    return wrapper
'''

SPEC = '''spec: 1
name: vtoy
summary: A hook on the pure escape.
snippets: {package: vsnips, alias: _v, path: snips}
targets:
  - id: escape
    file: vpkg/_native.py
    function: escape
    transforms:
      - wrap: {with: traced}
'''

MD_SPEC = '''spec: 1
name: vtoy
summary: A hook in the source of a module shipped compiled.
snippets: {package: vsnips, alias: _v, path: snips}
targets:
  - id: ratio
    file: vpkg/md.py
    function: mess_ratio
    transforms:
      - insert_before: {anchor: "return len(s)", code: "print('HOOK ratio')"}
'''

CALL = "import vpkg; print(vpkg.escape('x')); print(vpkg.render('y'))"


def _venv(tmp_path, speedups: bool):
    python, site = make_venv(tmp_path / "venv")
    install(site, {"vpkg/__init__.py": INIT, "vpkg/_native.py": NATIVE, "vpkg/md.py": MD})
    if speedups:
        build_extension(site / "vpkg", "vpkg._speedups", {"escape": "speedups:"})
    return python, site


def test_a_compiled_accelerator_bound_by_the_package_is_not_live_and_named(tmp_path, capsys):
    """``vpkg.escape`` is the C ``_speedups.escape``: a wrap of ``_native.escape`` runs for no caller.
    Before: "verified: 1 live" (the live vpkg._native.escape is the wrapper) and the hook never ran."""
    python, site = _venv(tmp_path, speedups=True)
    assert run(python, code=CALL) == ["speedups:x", "speedups:y"]
    spec = write_spec(tmp_path / "spec", SPEC, SNIPPET)
    before = tree(site)
    assert main(["apply", spec, "--root", str(site)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    so = site / "vpkg" / next(p.name for p in (site / "vpkg").glob("_speedups.*"))
    assert (f"vpkg.escape is vpkg._speedups.escape (compiled: {so}): a patch of _native.escape does not run "
            "for callers of vpkg.escape; it is compiled code: no source patch reaches it") in err
    assert "the change was undone" in err and "--no-verify" not in err
    assert tree(site) == before
    assert main(["apply", spec, "--root", str(site), "--no-verify"]) == 0
    assert run(python, code=CALL) == ["speedups:x", "speedups:y"]   # what the proof said: the hook never runs
    capsys.readouterr()
    assert main(["verify", spec, "--root", str(site)]) == 4
    assert "not-live: vtoy escape#0" in capsys.readouterr().out


def test_the_pure_fallback_callers_reach_is_live_and_says_through_which_name(tmp_path, capsys):
    python, site = _venv(tmp_path, speedups=False)
    spec = write_spec(tmp_path / "spec", SPEC, SNIPPET)
    assert main(["apply", spec, "--root", str(site)]) == 0
    capsys.readouterr()
    assert main(["verify", spec, "--root", str(site)]) == 0
    assert "callers of vpkg.escape reach it" in capsys.readouterr().out
    assert run(python, code=CALL) == ["HOOK escape", "native:x", "HOOK escape", "native:y"]


def test_a_compiled_module_beside_the_source_is_named_with_its_file(tmp_path, capsys):
    """mypyc's layout (charset-normalizer's ``md.py`` beside ``md.cpython-*.so``): Python imports the
    ``.so``. Before: "the live mess_ratio does not lead to the definition", the ``.so`` unnamed, and the
    advice `--no-verify`, which installs dead code."""
    python, site = _venv(tmp_path, speedups=False)
    so = build_extension(site / "vpkg", "vpkg.md", {"mess_ratio": "compiled:"})
    spec = write_spec(tmp_path / "spec", MD_SPEC, SNIPPET)
    assert main(["apply", spec, "--root", str(site)]) == 2
    err = capsys.readouterr().err.strip()
    assert f"vpkg.md is imported from {so}, a compiled module beside md.py: Python runs it, not the source" in err
    assert "--no-verify" not in err


def test_init_and_compile_warn_statically_of_a_fallback_binding_and_a_compiled_sibling(tmp_path, capsys):
    """Before: init and compile said nothing of either; the first word came from the proof."""
    python, site = _venv(tmp_path, speedups=False)
    so = build_extension(site / "vpkg", "vpkg.md", {"mess_ratio": "compiled:"})
    assert main(["init", "toy-fix", "--root", str(site), "--target", "vpkg/_native.py:escape",
                 "--target", "vpkg/md.py:mess_ratio", "--dir", str(tmp_path / "fix")]) == 0
    out = capsys.readouterr().out
    fallback = ("warning: vpkg/__init__.py:2: vpkg.escape is bound in try by `from ._speedups import escape as "
                "escape`, and from vpkg._native only in except ImportError (line 4): when the other branch runs, "
                "callers of vpkg.escape do not reach vpkg/_native.py")
    compiled = (f"warning: vpkg/md.py: vpkg/{so.name} is a compiled module beside it: Python imports that, not "
                "md.py, so no patch of its source runs there")
    assert fallback in out and compiled in out
    assert main(["compile", str(tmp_path / "fix" / "toy-fix.yaml"), "--root", str(site)]) == 0
    out = capsys.readouterr().out
    assert fallback in out and compiled in out


def test_a_package_binding_another_python_function_of_the_name_leaves_the_patch_live_and_says_so(tmp_path, capsys):
    """Another Python function (``vpkg.escape`` from ``vpkg.html``) is live code of its own: the patch of
    ``_native.escape`` runs for that module's callers; the row names whom the package's callers reach."""
    python, site = make_venv(tmp_path / "venv")
    install(site, {"vpkg/__init__.py": "from .html import escape\n", "vpkg/_native.py": NATIVE,
                   "vpkg/html.py": "def escape(s):\n    return 'html:' + s\n", "vpkg/md.py": MD})
    spec = write_spec(tmp_path / "spec", SPEC, SNIPPET)
    assert main(["apply", spec, "--root", str(site)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["verify", spec, "--root", str(site)]) == 0
    assert f"callers of vpkg.escape reach vpkg.html.escape ({site}/vpkg/html.py:1) instead" in capsys.readouterr().out


@pytest.mark.parametrize(("init", "reached"), [
    ("import functools\nfrom .html import escape as _e\nescape = functools.partial(_e)\n",
     "functools.partial(<function escape at"),
    ("from os import fspath as escape\n", "posix.fspath (built-in)"),
])
def test_a_partial_or_another_package_c_function_bound_there_is_no_accelerator(tmp_path, capsys, init, reached):
    """Only compiled code of the package itself stands for an accelerator; a ``functools.partial`` or a C
    function of another package bound under the name leave the patch live, said."""
    python, site = make_venv(tmp_path / "venv")
    install(site, {"vpkg/__init__.py": init, "vpkg/_native.py": NATIVE,
                   "vpkg/html.py": "def escape(s):\n    return 'html:' + s\n", "vpkg/md.py": MD})
    spec = write_spec(tmp_path / "spec", SPEC, SNIPPET)
    assert main(["apply", spec, "--root", str(site)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["verify", spec, "--root", str(site)]) == 0
    assert f"callers of vpkg.escape reach {reached}" in capsys.readouterr().out


def test_another_module_of_the_package_binding_the_accelerator_is_named_too(tmp_path, capsys):
    """The package's ``__init__`` exports nothing; ``vpkg.util`` picks the accelerator in a try/except,
    and callers use ``vpkg.util.escape``. Before this, the proof looked only above the module: live."""
    python, site = make_venv(tmp_path / "venv")
    install(site, {"vpkg/__init__.py": "from . import util\n", "vpkg/_native.py": NATIVE, "vpkg/md.py": MD,
                   "vpkg/util.py": INIT})
    so = build_extension(site / "vpkg", "vpkg._speedups", {"escape": "speedups:"})
    spec = write_spec(tmp_path / "spec", SPEC, SNIPPET)
    assert main(["apply", spec, "--root", str(site)]) == 2
    err = capsys.readouterr().err
    assert (f"vpkg.util.escape is vpkg._speedups.escape (compiled: {so}): a patch of _native.escape does not run "
            "for callers of vpkg.util.escape") in err


ALIASED = '''def python_escape(s):
    return "native:" + str(s)


try:
    from vpkg._speedups import escape
except ImportError:
    escape = python_escape
'''

ALIASED_SPEC = SPEC.replace("function: escape", "function: python_escape")


@pytest.mark.parametrize("speedups", [True, False])
def test_a_fallback_bound_under_another_name_of_the_module_is_not_live_when_the_accelerator_is(
        tmp_path, capsys, speedups):
    """pyrsistent's shape (docs/trials.md, class 1): ``_pvector.py`` binds ``pvector = python_pvector``
    only where ``from pvectorc import pvector`` fails. Before: a wrap of ``python_pvector`` was "verified:
    1 live" while every caller of ``vpkg.escape`` ran the C function; without the accelerator it runs."""
    python, site = make_venv(tmp_path / "venv")
    install(site, {"vpkg/__init__.py": "from ._native import escape\n", "vpkg/_native.py": ALIASED,
                   "vpkg/md.py": MD})
    so = build_extension(site / "vpkg", "vpkg._speedups", {"escape": "speedups:"}) if speedups else None
    spec = write_spec(tmp_path / "spec", ALIASED_SPEC, SNIPPET)
    before = tree(site)
    if speedups:
        assert main(["apply", spec, "--root", str(site)]) == 2
        err = capsys.readouterr().err
        assert (f"vpkg._native.escape is vpkg._speedups.escape (compiled: {so}), and escape is bound to "
                "python_escape only in a fallback branch: a patch of _native.python_escape does not run for "
                "callers of vpkg._native.escape") in err and "--no-verify" not in err
        assert tree(site) == before
    else:
        assert main(["apply", spec, "--root", str(site)]) == 0, capsys.readouterr().err
        assert run(python, code="import vpkg; print(vpkg.escape('x'))") == ["HOOK python_escape", "native:x"]


def test_init_warns_statically_of_a_fallback_bound_under_another_name(tmp_path, capsys):
    """Before: init said nothing of ``escape = python_escape`` standing only where the import fails."""
    site = tmp_path / "site"
    install(site, {"vpkg/__init__.py": "from ._native import escape\n", "vpkg/_native.py": ALIASED})
    assert main(["init", "toy-fix", "--root", str(site), "--target", "vpkg/_native.py:python_escape",
                 "--dir", str(tmp_path / "fix")]) == 0
    assert ("warning: vpkg/_native.py:6: escape is bound in try by `from vpkg._speedups import escape`, and to "
            "python_escape only in except ImportError (line 8): when the import runs, callers of escape do not "
            "reach python_escape") in capsys.readouterr().out


def test_init_on_a_name_every_branch_binds_without_a_definition_points_to_the_one_they_bind(tmp_path, capsys):
    """Before: "... choose one with `branch:`", which init cannot take and no branch could satisfy."""
    site = tmp_path / "site"
    install(site, {"vpkg/__init__.py": "from ._native import escape\n", "vpkg/_native.py": ALIASED})
    assert main(["init", "toy-fix", "--root", str(site), "--target", "vpkg/_native.py:escape",
                 "--dir", str(tmp_path / "fix")]) == 2
    err = capsys.readouterr().err
    assert "none of them is a definition: target the definition they bind, python_escape" in err, err
    assert "branch:" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "fix").exists()


PUBLIC_INIT = '''from . import fallback
try:
    from ._speedups import escape
except ImportError:
    from .fallback import escape
'''

PUBLIC_SPEC = SPEC.replace("vpkg/_native.py", "vpkg/fallback.py")


def test_a_public_pure_module_beside_the_accelerator_is_live_for_its_callers_and_names_the_package_name(
        tmp_path, capsys):
    """msgpack's shape (docs/corpus.md class 1): ``msgpack.Packer`` is the Cython class, and the pure
    ``msgpack.fallback.Packer`` is public, called by name. Before: apply undid the wrap of
    ``fallback.escape`` ("vpkg.escape is vpkg._speedups.escape ... no source patch reaches it") though
    callers of ``vpkg.fallback.escape`` run it."""
    python, site = make_venv(tmp_path / "venv")
    install(site, {"vpkg/__init__.py": PUBLIC_INIT, "vpkg/fallback.py": NATIVE, "vpkg/md.py": MD})
    so = build_extension(site / "vpkg", "vpkg._speedups", {"escape": "speedups:"})
    spec = write_spec(tmp_path / "spec", PUBLIC_SPEC, SNIPPET)
    assert main(["apply", spec, "--root", str(site)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["verify", spec, "--root", str(site)]) == 0
    out = capsys.readouterr().out
    assert "callers of vpkg.fallback.escape reach it" in out, out
    assert (f"callers of vpkg.escape reach vpkg._speedups.escape (compiled: {so}) instead: a patch of "
            "fallback.escape does not run for them") in out
    code = "import vpkg; print(vpkg.fallback.escape('x')); print(vpkg.escape('y'))"
    assert run(python, code=code) == ["HOOK escape", "native:x", "speedups:y"]


REBOUND_INIT = '''def escape(s):
    return "pure:" + str(s)


py_escape = escape
try:
    from ._speedups import escape as c_escape
except ImportError:
    pass
else:
    escape = c_escape
'''

REBOUND_SPEC = '''spec: 1
name: vtoy
summary: A hook in the pure escape, rebound to the C one.
snippets: {package: vsnips, alias: _v, path: snips}
targets:
  - id: escape
    file: vpkg/__init__.py
    function: escape
    branch: top level
    transforms:
      - insert_before: {anchor: 'return "pure:" + str(s)', code: "print('HOOK pure')"}
      - wrap: {with: traced}
'''


def test_a_definition_the_module_rebinds_is_live_for_the_public_name_that_still_holds_it(tmp_path, capsys):
    """frozenlist's shape (docs/corpus.md class 8): ``FrozenList = CFrozenList`` in an ``else:``, while
    ``PyFrozenList`` keeps the pure class. Before: both transforms were undone ("the live escape does not
    lead to the definition") though callers of ``vpkg.py_escape`` run them."""
    python, site = make_venv(tmp_path / "venv")
    install(site, {"vpkg/__init__.py": REBOUND_INIT})
    so = build_extension(site / "vpkg", "vpkg._speedups", {"escape": "speedups:"})
    spec = write_spec(tmp_path / "spec", REBOUND_SPEC, SNIPPET)
    assert main(["apply", spec, "--root", str(site)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["verify", spec, "--root", str(site)]) == 0
    out = capsys.readouterr().out
    assert out.count(f"callers of vpkg.escape reach vpkg._speedups.escape (compiled: {so}) instead, which the "
                     "patch does not change") == 2, out
    assert "the live vpkg.py_escape" in out
    code = "import vpkg; print(vpkg.py_escape('x')); print(vpkg.escape('y'))"
    assert run(python, code=code) == ["HOOK escape", "HOOK pure", "pure:x", "speedups:y"]


CLASS_SPEC = '''spec: 1
name: vtoy
summary: A hook in a class another module's class of the same name shadows at the package.
snippets: {package: vsnips, alias: _v, path: snips}
targets:
  - id: arg
    file: vpkg/parser.py
    function: Argument.take
    transforms:
      - insert_before: {anchor: "return x", code: "print('HOOK take')"}
'''


def test_another_python_class_of_the_name_is_named_by_its_file_not_as_built_in(tmp_path, capsys):
    """click's ``click.Argument`` is ``click.core.Argument`` while the patch is of ``parser.Argument``
    (docs/corpus.md class 1). Before: "(built-in)", a Python class named as if it were C."""
    python, site = make_venv(tmp_path / "venv")
    install(site, {"vpkg/__init__.py": "from . import parser\nfrom .core import Argument\n",
                   "vpkg/core.py": "class Argument:\n    pass\n",
                   "vpkg/parser.py": "class Argument:\n    def take(self, x):\n        return x\n"})
    spec = write_spec(tmp_path / "spec", CLASS_SPEC, SNIPPET)
    assert main(["apply", spec, "--root", str(site)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["verify", spec, "--root", str(site)]) == 0
    out = capsys.readouterr().out
    assert f"callers of vpkg.Argument reach vpkg.core.Argument ({site}/vpkg/core.py) instead" in out, out
    assert "built-in" not in out
    assert run(python, code="import vpkg; print(vpkg.parser.Argument().take(1))") == ["HOOK take", "1"]


SCANNER = '''try:
    from ._speedups import scanstring as c_scanstring
except ImportError:
    c_scanstring = None


def py_scanstring(s):
    return "py:" + str(s)


scanstring = {value}


def loads(s):
    return scanstring(s)
'''

SCANNER_SPEC = '''spec: 1
name: vtoy
summary: A hook in the pure scanner.
snippets: {package: vsnips, alias: _v, path: snips}
targets:
  - id: scan
    file: vpkg/decoder.py
    function: py_scanstring
    transforms:
      - insert_before: {anchor: "return \\"py:\\" + str(s)", code: "print('HOOK scan')"}
'''

SCANNER_FORMS = ["c_scanstring or py_scanstring", "c_scanstring if c_scanstring else py_scanstring"]


@pytest.mark.parametrize("value", SCANNER_FORMS)
@pytest.mark.parametrize("speedups", [True, False])
def test_a_fallback_chosen_by_or_or_if_is_not_live_when_the_accelerator_is(tmp_path, capsys, value, speedups):
    """stdlib json's and simplejson's shape, in a private module: ``scanstring = c_scanstring or
    py_scanstring``. Before: an ``insert_before`` in ``py_scanstring`` was "verified: 1 live" while
    ``loads`` ran the C scanner."""
    python, site = make_venv(tmp_path / "venv")
    install(site, {"vpkg/__init__.py": "from ._decoder import loads\n",
                   "vpkg/_decoder.py": SCANNER.format(value=value)})
    so = build_extension(site / "vpkg", "vpkg._speedups", {"scanstring": "c:"}) if speedups else None
    spec = write_spec(tmp_path / "spec", SCANNER_SPEC.replace("vpkg/decoder.py", "vpkg/_decoder.py"), SNIPPET)
    before = tree(site)
    code = "import vpkg; print(vpkg.loads('x'))"
    if speedups:
        assert main(["apply", spec, "--root", str(site)]) == 2
        err = capsys.readouterr().err
        assert (f"vpkg._decoder.scanstring is vpkg._speedups.scanstring (compiled: {so}), and scanstring is bound "
                "to py_scanstring only in a fallback branch: a patch of _decoder.py_scanstring does not run for "
                "callers of vpkg._decoder.scanstring") in err, err
        assert "--no-verify" not in err and tree(site) == before
        assert run(python, code=code) == ["c:x"]
    else:
        assert main(["apply", spec, "--root", str(site)]) == 0, capsys.readouterr().err
        assert run(python, code=code) == ["HOOK scan", "py:x"]


def test_a_fallback_chosen_by_or_in_a_public_module_is_live_for_its_own_name_and_names_the_other(tmp_path, capsys):
    """simplejson's ``encoder.py_encode_basestring_ascii`` (corpus run of this session, 3 false not-live):
    the public name of the pure function in a public module is what its callers (and simplejson's own
    ``_toggle_speedups(False)``) use, as msgpack's public ``fallback.Packer`` is (docs/corpus.md class 1).
    Before: apply undid it, "a patch of decoder.py_scanstring does not run for callers of
    vpkg.decoder.scanstring", though callers of ``vpkg.decoder.py_scanstring`` run it."""
    python, site = make_venv(tmp_path / "venv")
    install(site, {"vpkg/__init__.py": "from . import decoder\n",
                   "vpkg/decoder.py": SCANNER.format(value=SCANNER_FORMS[0])})
    so = build_extension(site / "vpkg", "vpkg._speedups", {"scanstring": "c:"})
    spec = write_spec(tmp_path / "spec", SCANNER_SPEC, SNIPPET)
    assert main(["apply", spec, "--root", str(site)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["verify", spec, "--root", str(site)]) == 0
    out = capsys.readouterr().out
    assert "callers of vpkg.decoder.py_scanstring reach it" in out, out
    assert (f"vpkg.decoder.scanstring is vpkg._speedups.scanstring (compiled: {so}), and scanstring is bound to "
            "py_scanstring only in a fallback branch: callers of vpkg.decoder.scanstring reach that instead, and a "
            "patch of decoder.py_scanstring does not run for them") in out
    code = "import vpkg; print(vpkg.decoder.py_scanstring('x'), vpkg.decoder.loads('y'))"
    assert run(python, code=code) == ["HOOK scan", "py:x c:y"]


@pytest.mark.parametrize("value", SCANNER_FORMS)
def test_init_warns_statically_of_a_fallback_chosen_by_or_or_if(tmp_path, capsys, value):
    """Before: init said nothing of ``scanstring`` holding the imported ``c_scanstring`` when it is there."""
    site = tmp_path / "site"
    install(site, {"vpkg/__init__.py": "", "vpkg/decoder.py": SCANNER.format(value=value)})
    assert main(["init", "toy-fix", "--root", str(site), "--target", "vpkg/decoder.py:py_scanstring",
                 "--dir", str(tmp_path / "fix")]) == 0
    assert (f"warning: vpkg/decoder.py:11: scanstring is bound to `{value}`, and c_scanstring is bound in try by "
            "`from ._speedups import scanstring as c_scanstring` (line 2): when the import runs, callers of "
            "scanstring do not reach py_scanstring") in capsys.readouterr().out


SELECTOR = '''import os

if not os.environ.get("VPKG_NO_EXTENSIONS"):
    try:
        from ._quoting_c import quote
    except ImportError:
        from ._quoting_py import quote
else:
    from ._quoting_py import quote
'''

QUOTING_SPEC = SPEC.replace("file: vpkg/_native.py", "file: vpkg/_quoting_py.py").replace("function: escape",
                                                                                          "function: quote")


def _selector_package(site):
    install(site, {"vpkg/__init__.py": "from ._url import render\n",
                   "vpkg/_url.py": "from ._quoting import quote\n\n\ndef render(s):\n    return quote(s)\n",
                   "vpkg/_quoting.py": SELECTOR, "vpkg/_quoting_py.py": NATIVE.replace("escape", "quote")})


def test_init_and_compile_warn_statically_of_a_sibling_module_choosing_the_targets_module(tmp_path, capsys):
    """yarl's shape: ``yarl/_quoting.py`` picks ``_quoting_c`` (compiled) or ``_quoting_py`` by a try/except
    import, and the package's modules import it from ``_quoting``. Before: init and compile said nothing,
    the module choosing is neither the target nor a package above it."""
    site = tmp_path / "site"
    _selector_package(site)
    assert main(["init", "toy-fix", "--root", str(site), "--target", "vpkg/_quoting_py.py:quote",
                 "--dir", str(tmp_path / "fix")]) == 0
    warning = ("warning: vpkg/_quoting.py:5: vpkg._quoting.quote is bound in try by `from ._quoting_c import quote`, "
               "and from vpkg._quoting_py only in except ImportError (line 7): when the other branch runs, callers "
               "of vpkg._quoting.quote do not reach vpkg/_quoting_py.py")
    out = capsys.readouterr().out
    assert warning in out, out
    assert main(["compile", str(tmp_path / "fix" / "toy-fix.yaml"), "--root", str(site)]) == 0
    assert warning in capsys.readouterr().out


@pytest.mark.parametrize("speedups", [True, False])
def test_a_sibling_module_choosing_the_accelerator_leaves_the_pure_module_not_live(tmp_path, capsys, speedups):
    """The proof at run time of the same shape: with ``_quoting_c`` built, callers of ``vpkg.render`` run
    the C ``quote``; without it, the patched ``_quoting_py.quote``."""
    python, site = make_venv(tmp_path / "venv")
    _selector_package(site)
    so = build_extension(site / "vpkg", "vpkg._quoting_c", {"quote": "c:"}) if speedups else None
    spec = write_spec(tmp_path / "spec", QUOTING_SPEC, SNIPPET)
    before = tree(site)
    code = "import vpkg; print(vpkg.render('x'))"
    if speedups:
        assert main(["apply", spec, "--root", str(site)]) == 2
        err = capsys.readouterr().err
        assert f"vpkg._quoting.quote is vpkg._quoting_c.quote (compiled: {so})" in err, err
        assert "--no-verify" not in err
        assert tree(site) == before
        assert run(python, code=code) == ["c:x"]
    else:
        assert main(["apply", spec, "--root", str(site)]) == 0, capsys.readouterr().err
        assert run(python, code=code) == ["HOOK quote", "native:x"]


VEC = '''class PyVec:
    def append(self, x):
        return [x]


def python_vec():
    return PyVec()
'''

VEC_SPEC = '''spec: 1
name: vtoy
summary: A hook in a class no public name binds, which a public class subclasses.
snippets: {package: vsnips, alias: _v, path: snips}
targets:
  - id: append
    file: vpkg/_vec.py
    function: PyVec.append
    transforms:
      - insert_before: {anchor: "return [x]", code: "print('HOOK append')"}
'''


def test_a_member_of_a_class_no_public_name_binds_names_the_public_subclass_its_callers_use(tmp_path, capsys):
    """pyrsistent's ``_pvector.PythonPVector`` (docs/trials.md, left open): ``pyrsistent.pvector`` builds
    the C vector, but ``pyrsistent.CheckedPVector`` subclasses the pure class, so its methods run for those
    callers. Before: live, with no word of which public name reaches it."""
    python, site = make_venv(tmp_path / "venv")
    install(site, {"vpkg/__init__.py": "from ._checked import Checked\n", "vpkg/_vec.py": VEC,
                   "vpkg/_checked.py": "from ._vec import PyVec\n\n\nclass Checked(PyVec):\n    pass\n"})
    spec = write_spec(tmp_path / "spec", VEC_SPEC, SNIPPET)
    assert main(["apply", spec, "--root", str(site)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["verify", spec, "--root", str(site)]) == 0
    assert "callers of vpkg.Checked (a subclass) reach it" in capsys.readouterr().out
    assert run(python, code="import vpkg; print(vpkg.Checked().append(1))") == ["HOOK append", "[1]"]


PVECTOR = '''class PVector:
    def append(self, x):
        return "py:" + str(x)


def python_pvector():
    return PVector()


try:
    from vpkg._cvector import pvector
except ImportError:
    pvector = python_pvector
'''

PVECTOR_SPEC = '''spec: 1
name: vtoy
summary: A hook in the pure class's method.
snippets: {package: vsnips, alias: _v, path: snips}
targets:
  - id: append
    file: vpkg/_pvector.py
    function: PVector.append
    transforms:
      - insert_before: {anchor: 'return "py:" + str(x)', code: "print('HOOK append')"}
'''

BUILD = "import vpkg; print(vpkg.pvector().append(1))"


def _pvector_venv(tmp_path, speedups: bool, files: dict[str, str]):
    python, site = make_venv(tmp_path / "venv")
    install(site, {"vpkg/__init__.py": "from ._pvector import pvector\n", "vpkg/_pvector.py": PVECTOR, **files})
    so = build_extension(site / "vpkg", "vpkg._cvector", {}, {"PVector": ("pvector", "c:")}) if speedups else None
    return python, site, so


@pytest.mark.parametrize("speedups", [True, False])
def test_a_method_of_a_fallback_class_is_not_live_when_callers_build_the_compiled_class(tmp_path, capsys, speedups):
    """pyrsistent 0.20.0's shape (docs/trials.md, class 1, the method): callers build vectors with
    ``vpkg.pvector()``, the C factory when ``_cvector`` imports (a C ``PVector`` of the same name), the
    pure ``python_pvector`` only in ``except ImportError``. Before: "verified: 1 live" ("line(s) 3 in the
    live code of vpkg._pvector.PVector.append") while ``vpkg.pvector().append`` ran the C method."""
    python, site, so = _pvector_venv(tmp_path, speedups, {})
    spec = write_spec(tmp_path / "spec", PVECTOR_SPEC, SNIPPET)
    if speedups:
        assert run(python, code=BUILD) == ["c:1"]
        before = tree(site)
        assert main(["apply", spec, "--root", str(site)]) == 2
        err = capsys.readouterr().err
        assert (f"vpkg._pvector.pvector is vpkg._cvector.pvector (compiled: {so}), and pvector is bound to "
                "python_pvector, which builds PVector, only in a fallback branch: a patch of "
                "_pvector.PVector.append does not run for callers of vpkg._pvector.pvector") in err, err
        assert "--no-verify" not in err and len(err.strip().splitlines()) == 1
        assert tree(site) == before
    else:
        assert main(["apply", spec, "--root", str(site)]) == 0, capsys.readouterr().err
        assert run(python, code=BUILD) == ["HOOK append", "py:1"]


def test_a_public_subclass_keeps_the_method_live_and_the_row_names_the_compiled_factory(tmp_path, capsys):
    """pyrsistent's ``CheckedPVector`` subclasses ``PythonPVector``: its callers run the patch, callers of
    ``pvector()`` do not, and the row says both. Before: live, naming the subclass alone."""
    checked = {"vpkg/__init__.py": "from ._pvector import pvector\nfrom ._checked import Checked\n",
               "vpkg/_checked.py": "from ._pvector import PVector\n\n\nclass Checked(PVector):\n    pass\n"}
    python, site, so = _pvector_venv(tmp_path, True, checked)
    spec = write_spec(tmp_path / "spec", PVECTOR_SPEC, SNIPPET)
    assert main(["apply", spec, "--root", str(site)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["verify", spec, "--root", str(site)]) == 0
    out = capsys.readouterr().out
    assert "callers of vpkg.Checked (a subclass) reach it" in out, out
    assert (f"vpkg._pvector.pvector is vpkg._cvector.pvector (compiled: {so}), and pvector is bound to "
            "python_pvector, which builds PVector, only in a fallback branch: callers of vpkg._pvector.pvector "
            "reach that instead") in out, out
    assert run(python, code=BUILD + "; print(vpkg.Checked().append(2))") == ["c:1", "HOOK append", "py:2"]


def test_apply_shows_a_live_row_whose_package_name_reaches_compiled_code_instead(tmp_path, capsys):
    """immutables 0.21's shape (docs/trials.md, session 5): ``immutables.Map`` is the C class, the pure
    ``immutables.map.Map`` is live for its own callers only. Before: apply printed "verified: 1 live" and
    nothing else, so a user fixing ``immutables.Map`` was told the fix runs; the caveat was in `verify` alone."""
    python, site = make_venv(tmp_path / "venv")
    install(site, {"vpkg/__init__.py": PUBLIC_INIT, "vpkg/fallback.py": NATIVE, "vpkg/md.py": MD})
    so = build_extension(site / "vpkg", "vpkg._speedups", {"escape": "speedups:"})
    spec = write_spec(tmp_path / "spec", PUBLIC_SPEC, SNIPPET)
    assert main(["apply", spec, "--root", str(site)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert ("live for some callers: vtoy escape#0 wrap escape in vpkg/fallback.py (the live vpkg.fallback.escape is "
            "traced.<locals>.wrapper") in out, out
    assert (f"callers of vpkg.escape reach vpkg._speedups.escape (compiled: {so}) instead: a patch of "
            "fallback.escape does not run for them") in out
    assert "verified: 1 live (1 of them not for every caller), 0 shown statically, 0 not live" in out


TYPED_INIT = '''from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._speedups import escape
else:
    try:
        from ._speedups import escape
    except ImportError:
        from ._native import escape
'''


def test_the_static_warning_names_the_import_that_runs_not_the_one_under_type_checking(tmp_path, capsys):
    """immutables' ``__init__`` (docs/trials.md, session 5). Before: "bound in if TYPE_CHECKING by ...
    (line 4)", a branch that never runs, while the accelerator's import that runs (line 7) went unnamed."""
    site = tmp_path / "site"
    install(site, {"vpkg/__init__.py": TYPED_INIT, "vpkg/_native.py": NATIVE})
    assert main(["init", "toy-fix", "--root", str(site), "--target", "vpkg/_native.py:escape",
                 "--dir", str(tmp_path / "fix")]) == 0
    out = capsys.readouterr().out
    assert ("warning: vpkg/__init__.py:7: vpkg.escape is bound in try by `from ._speedups import escape`, and from "
            "vpkg._native only in except ImportError (line 9)") in out, out


LAZY_INIT = '''def __getattr__(name):  # the public names served from api on first use (propcache's facade)
    from . import api
    return getattr(api, name)
'''

CHOOSER = '''try:
    from ._speedups import escape as escape_c
    escape = escape_c
except ImportError:
    from ._native import escape
'''


def test_an_accelerator_chosen_in_a_module_only_a_public_submodule_imports_is_not_live(tmp_path, capsys):
    """propcache 0.2.0's shape (found by a spec written from the docs, not by the corpus): ``propcache.api``
    imports from ``_helpers``, which binds the Cython class over the pure one, and ``propcache/__init__.py``
    imports neither (a module ``__getattr__`` serves them). Before: apply and verify said "1 live", and
    callers of ``vpkg.api.escape`` ran the compiled code: the proof never imported ``api``."""
    python, site = make_venv(tmp_path / "venv")
    install(site, {"vpkg/__init__.py": LAZY_INIT, "vpkg/api.py": "from ._choose import escape\n",
                   "vpkg/_choose.py": CHOOSER, "vpkg/_native.py": NATIVE, "vpkg/md.py": MD})
    so = build_extension(site / "vpkg", "vpkg._speedups", {"escape": "speedups:"})
    spec = write_spec(tmp_path / "spec", SPEC, SNIPPET)
    assert main(["apply", spec, "--root", str(site)]) == 2
    err = capsys.readouterr().err
    assert f"vpkg._choose.escape is vpkg._speedups.escape (compiled: {so})" in err, err
    assert run(python, code="import vpkg.api; print(vpkg.api.escape('y'))") == ["speedups:y"]
