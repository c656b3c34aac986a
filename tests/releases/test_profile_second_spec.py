"""A second spec beside the first shares its release profiles (a profile holds one section per spec):
`profile new` for the second adds its section to the release's profile, as the advice of `check` says.
Found in the trial of boltons (docs/trials.md, session 5)."""
from __future__ import annotations

import yaml

from patchspec.cli import main
from tests.verify_toy import install

SECOND = '''spec: 1
name: two-fix
summary: A second spec in the same directory.
targets:
  - id: g
    file: vpkg/mod.py
    function: g
    transforms:
      - set: {parameter: y, value: "3"}
'''


def test_profile_new_for_a_second_spec_adds_its_section_to_the_release_profile(tmp_path, capsys):
    """Before: check said "draft one: patchspec profile new NAME ..."; doing so with the release's name
    exited 2, "vpkg-1.0.yaml exists; --force to replace it", though nothing of that file was to be replaced."""
    site = tmp_path / "site"
    install(site, {"vpkg/__init__.py": "", "vpkg/mod.py": "def f(x):\n    return x\n\n\ndef g(y=1):\n    return y\n"})
    fix = tmp_path / "fix"
    assert main(["init", "one-fix", "--root", str(site), "--target", "vpkg/mod.py:f", "--dir", str(fix)]) == 0
    (fix / "two-fix.yaml").write_text(SECOND)
    profile = fix / "releases" / "vpkg-1.0.yaml"
    first = yaml.safe_load(profile.read_text())["specs"]["one-fix"]
    capsys.readouterr()
    assert main(["check", str(fix / "two-fix.yaml"), "--root", str(site)]) == 2
    assert "patchspec profile new NAME" in capsys.readouterr().err
    assert main(["profile", "new", "vpkg-1.0", "--root", str(site), "--spec", str(fix / "two-fix.yaml")]) == 0, \
        capsys.readouterr().err
    specs = yaml.safe_load(profile.read_text())["specs"]
    assert specs["one-fix"] == first and set(specs["two-fix"]["fingerprints"]) == {"g"}
    assert main(["check", str(fix / "two-fix.yaml"), "--root", str(site)]) == 1   # would apply
    assert main(["check", str(fix / "one-fix.yaml"), "--root", str(site)]) == 1
    capsys.readouterr()
    assert main(["profile", "new", "vpkg-1.0", "--root", str(site), "--spec", str(fix / "two-fix.yaml")]) == 2
    err = capsys.readouterr().err
    assert ("vpkg-1.0.yaml holds a section of two-fix already; --force replaces it (the other specs' sections are "
            "kept)") in err, err
