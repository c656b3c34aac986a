"""Formats carry versions: an older spec, profile or state record is read (with a warning where a key
changed), a newer one is refused in one line saying so."""
from __future__ import annotations

import json

from patchspec.cli import main
from patchspec.install.state import STATE_FILE, VERSION
from tests.state.toy import toy_root, write_spec


def test_a_profile_says_its_format_and_one_without_is_format_1(tmp_path, capsys):
    root, spec = toy_root(tmp_path / "root"), write_spec(tmp_path / "spec")
    profile = tmp_path / "spec" / "releases" / "r1.yaml"
    assert "format" not in profile.read_text()
    assert main(["check", spec, "--root", str(root)]) == 1
    profile.write_text("format: 1\n" + profile.read_text())
    assert main(["check", spec, "--root", str(root)]) == 1


def test_a_profile_of_a_newer_format_is_refused_in_one_line(tmp_path, capsys):
    root, spec = toy_root(tmp_path / "root"), write_spec(tmp_path / "spec")
    profile = tmp_path / "spec" / "releases" / "r1.yaml"
    profile.write_text("format: 2\n" + profile.read_text())
    capsys.readouterr()
    assert main(["check", spec, "--release", "r1", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert err == f"patchspec: {profile}:1:1: profile format 2 is newer than this patchspec reads (1); upgrade patchspec\n"


def test_a_state_record_of_a_newer_format_is_refused_in_one_line(tmp_path, capsys):
    root, spec = toy_root(tmp_path / "root"), write_spec(tmp_path / "spec")
    assert main(["apply", spec, "--root", str(root), "--no-verify"]) == 0
    record = root / STATE_FILE
    data = json.loads(record.read_text())
    data["version"] = VERSION + 1
    record.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["status", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"state record format {VERSION + 1} is newer than this patchspec reads" in err
