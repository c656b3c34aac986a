"""``check`` says of a transform whose change the release holds already what ``compile`` says of it, the
word ``drift`` calls ``obsolete``: apply writes nothing for it (docs/trials.md, session 5, immutables'
``Map.get``: ``set`` of ``default=None`` to ``None``)."""
from __future__ import annotations

from patchspec.cli import main
from tests.verify_toy import install, write_spec

SPEC = '''spec: 1
name: vtoy
summary: A default set to the value it has, and one real change.
targets:
  - id: g
    file: vpkg/mod.py
    function: g
    transforms:
      - set: {parameter: y, value: "None"}
      - insert_before: {anchor: "return y", code: "y = y"}
'''


def test_check_names_a_change_the_release_holds_already(tmp_path, capsys):
    """Before: "would-apply: vtoy g#0 set g in vpkg/mod.py:1" and nothing else, while compile said "(the
    default of y is that value already)" and drift "obsolete"."""
    site = tmp_path / "site"
    install(site, {"vpkg/__init__.py": "", "vpkg/mod.py": "def g(y=None):\n    return y\n"})
    spec = write_spec(tmp_path / "spec", SPEC)
    assert main(["check", spec, "--root", str(site)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert "would-apply: vtoy g#0 set g in vpkg/mod.py:1 (the default of y is that value already: nothing to " \
           "write)" in out, out
    assert "would-apply: vtoy g#1 insert_before g in vpkg/mod.py:2" in out
