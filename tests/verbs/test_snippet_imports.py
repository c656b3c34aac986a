"""Snippet imports resolve before anything is written (issue 20, item 6: a snippet importing a module that
is not installed passed validate and apply; afterwards every import of the patched package raised
ModuleNotFoundError)."""
from __future__ import annotations

import pytest

from patchspec.cli import main
from tests.state.toy import tree
from tests.verify_toy import MOD, SNIPPET, install, run, toy_venv, write_spec


@pytest.mark.parametrize("line, module", [
    ("import not_installed_anywhere", "not_installed_anywhere"),
    ("from vpkg.nothing_here import x", "vpkg.nothing_here"),
    ("from .sibling_missing import y", "_patchspec_runtime.vsnips.sibling_missing"),
])
def test_apply_refuses_a_snippet_import_that_does_not_resolve(tmp_path, capsys, line, module):
    python, site = toy_venv(tmp_path)
    spec = write_spec(tmp_path / "spec", snippet=SNIPPET + line + "\n")
    before = tree(site)
    assert main(["apply", spec, "--root", str(site)]) == 2
    err = capsys.readouterr().err.strip()
    snippet = tmp_path / "spec" / "snips" / "vsnips" / "__init__.py"
    assert err == (f"patchspec: {snippet}:{SNIPPET.count(chr(10)) + 1}: snippet package vsnips imports {module}, "
                   "which is neither under the root nor installed for its interpreter: importing any patched "
                   "module would fail; install it or drop the import; nothing was written")
    assert tree(site) == before
    assert main(["validate", spec, "--root", str(site)]) == 2
    assert f"imports {module}," in capsys.readouterr().err
    assert main(["validate", spec]) == 0   # without a root there is nothing to resolve against


def test_imports_from_the_root_the_interpreter_and_the_package_itself_apply(tmp_path, capsys):
    python, site = toy_venv(tmp_path)
    imports = ("import json\nimport vpkg.mod\nfrom . import helper\n"
               "try:\n    import optional_thing\nexcept ImportError:\n    pass\n")
    spec = write_spec(tmp_path / "spec", snippet=imports + SNIPPET)
    (tmp_path / "spec" / "snips" / "vsnips" / "helper.py").write_text("")
    assert main(["apply", spec, "--root", str(site)]) == 0
    assert "verified: 7 live" in capsys.readouterr().out
    assert run(python)[0] == "HOOK send"


def test_a_plain_directory_says_where_it_looked_and_how_to_name_the_interpreter(tmp_path, capsys):
    root = tmp_path / "tree"
    install(root, {"vpkg/__init__.py": "", "vpkg/mod.py": MOD})
    spec = write_spec(tmp_path / "spec", snippet=SNIPPET + "import not_installed_anywhere\n")
    assert main(["apply", spec, "--root", str(root)]) == 2
    assert "nor installed for the interpreter running patchspec (no interpreter is known to run the root: " \
           "--python names it)" in capsys.readouterr().err


def test_a_module_the_patched_file_imports_itself_adds_no_failure_and_is_not_refused(tmp_path, capsys):
    """A plain directory holding only vLLM's files has no torch, and neither has the interpreter running
    patchspec: the snippet's ``import torch`` is refused no more than vLLM's own (the wheel's demo)."""
    for name, snippet_import, code in (("needed", "not_installed_anywhere", 0), ("new", "also_not_installed", 2)):
        root = tmp_path / name / "tree"
        install(root, {"vpkg/__init__.py": "", "vpkg/mod.py": "import not_installed_anywhere\n" + MOD})
        spec = write_spec(tmp_path / name / "spec", snippet=f"{SNIPPET}import {snippet_import}\n")
        assert main(["validate", spec, "--root", str(root)]) == code
        assert (f"imports {snippet_import}," in capsys.readouterr().err) == bool(code)
        assert main(["apply", spec, "--root", str(root), "--no-verify"]) == code
        assert (f"imports {snippet_import}," in capsys.readouterr().err) == bool(code)
