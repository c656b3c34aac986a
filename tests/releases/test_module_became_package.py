"""A target module that became a package between releases (``m.py`` -> ``m/__init__.py``, or back):
drift and check say where the module is now and the override that follows it, instead of only "file
vpkg/mod.py does not exist"."""
from __future__ import annotations

import pytest

from patchspec.cli import main
from tests.verify_toy import install, write_spec

BODY = "def f(x):\n    return x\n"

SPEC = '''spec: 1
name: vtoy
summary: A hook in f.
snippets: {{package: vsnips, alias: _v, path: snips}}
targets:
  - id: f
    file: {file}
    function: f
    transforms:
      - insert_before: {{anchor: "return x", code: "_v.seen('f')"}}
'''


@pytest.mark.parametrize(("old", "new", "what"), [("vpkg/mod.py", "vpkg/mod/__init__.py", "a package"),
                                                   ("vpkg/mod/__init__.py", "vpkg/mod.py", "a module")])
def test_drift_and_check_say_the_module_moved_into_or_out_of_a_package(tmp_path, capsys, old, new, what):
    site = tmp_path / "site"
    install(site, {"vpkg/__init__.py": "", new: BODY})
    spec = write_spec(tmp_path / "spec", SPEC.format(file=old))
    hint = (f"file {old} does not exist; the module is {new} here (it became {what}): give the target "
            f"`file: {new}` (a release profile's override, for this release only)")
    assert main(["drift", spec, "--root", str(site)]) == 4
    out = capsys.readouterr().out
    assert hint in out, out
    assert main(["check", spec, "--root", str(site)]) == 4
    assert hint in capsys.readouterr().out
    profile = tmp_path / "spec" / "releases" / "r1.yaml"
    profile.write_text(profile.read_text() + f"specs:\n  vtoy:\n    overrides:\n      f: {{file: {new}}}\n")
    assert main(["check", spec, "--root", str(site)]) == 1, capsys.readouterr().err   # would apply


def test_drift_and_profile_new_name_the_module_of_the_package_that_defines_the_target_now(tmp_path, capsys):
    """tenacity's shape (the trial of docs/trials.md): ``tenacity/_asyncio.py`` (8.2.3) became
    ``tenacity/asyncio/__init__.py`` (9.0.0). Before: "file ... does not exist" and nothing more."""
    site = tmp_path / "site"
    install(site, {"vpkg/__init__.py": "", "vpkg/aio/__init__.py": "class Retry:\n    " + BODY.replace("\n", "\n    "),
                   "vpkg/other.py": "def f(x):\n    return x\n"})   # another f, of no class: not a candidate
    spec = write_spec(tmp_path / "spec", SPEC.format(file="vpkg/_aio.py").replace("function: f",
                                                                                 "function: Retry.f"))
    hint = ("file vpkg/_aio.py does not exist; Retry.f is defined in vpkg/aio/__init__.py here: give the target "
            "`file: vpkg/aio/__init__.py` (a release profile's override, for this release only)")
    assert main(["drift", spec, "--root", str(site)]) == 4
    assert hint in capsys.readouterr().out
    assert main(["profile", "new", "r2", "--root", str(site), "--spec", spec, "--from", "r1"]) == 4
    assert hint in capsys.readouterr().out
