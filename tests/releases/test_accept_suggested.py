"""``profile new --accept-suggested`` takes the suggestion it printed (issue 27, item 12): markupsafe 3.0
renamed ``_native.escape`` to ``_escape_inner`` and rewrote its body, so no candidate holds every anchor
(a wrap has none), and the only suggestion is "did you mean `_escape_inner`?": accepting takes it when
every transform resolves there."""
from __future__ import annotations

from pathlib import Path

from patchspec.cli import main


def _release(tmp_path: Path, version: str, source: str) -> Path:
    root = tmp_path / f"root-{version}"
    (root / "toy").mkdir(parents=True)
    (root / "toy" / "__init__.py").write_text("")
    (root / "toy" / "_native.py").write_text(source)
    (root / f"toy-{version}.dist-info").mkdir()
    (root / f"toy-{version}.dist-info" / "METADATA").write_text(f"Name: toy\nVersion: {version}\n\n")
    (root / f"toy-{version}.dist-info" / "top_level.txt").write_text("toy\n")
    return root


def test_accept_suggested_takes_the_nearest_name_it_printed(tmp_path, capsys):
    """Before: exit 4 with --accept-suggested too, the draft unwritten, though the line said what to do."""
    old = _release(tmp_path, "1.0", "def escape(s):\n    if hasattr(s, '__html__'):\n        return s\n"
                                    "    return str(s).replace('&', '&amp;')\n")
    new = _release(tmp_path, "2.0", "def _escape_inner(s, /):\n    return s.replace('&', '&amp;')\n")
    work = tmp_path / "fix"
    assert main(["init", "toy-fix", "--root", str(old), "--target", "toy/_native.py:escape", "--dir", str(work)]) == 0
    spec = str(work / "toy-fix.yaml")
    capsys.readouterr()
    assert main(["profile", "new", "toy-2.0", "--root", str(new), "--spec", spec, "--from", "toy-1.0"]) == 4
    assert "did you mean _escape_inner?" in capsys.readouterr().out
    assert main(["profile", "new", "toy-2.0", "--root", str(new), "--spec", spec, "--from", "toy-1.0",
                 "--accept-suggested"]) == 0
    out = capsys.readouterr().out
    assert "accepted: toy-fix: escape: escape is not defined in toy/_native.py; its nearest name is _escape_inner" \
        in out
    draft = (work / "releases" / "toy-2.0.yaml").read_text()
    assert "overrides:\n      escape:\n        function: _escape_inner" in draft
    assert main(["check", spec, "--root", str(new)]) == 1   # applies there (exit 1: not applied yet)
