"""Formats carry versions: an older spec, profile or state record is read (with a warning where a key
changed), a newer one is refused in one line saying so."""
from __future__ import annotations

import json

import yaml

from patchspec.cli import main
from patchspec.install.state import STATE_FILE, VERSION, State
from patchspec.releases import profiles
from tests.state.toy import SPEC, toy_root, write_spec


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
    assert err == (f"patchspec: {profile}:1:1: profile format 2 is newer than this patchspec reads (1); "
                   "upgrade patchspec\n")


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


def test_profile_new_writes_the_current_profile_format(tmp_path, capsys):
    root, spec = toy_root(tmp_path / "root"), write_spec(tmp_path / "spec")
    assert main(["profile", "new", "r3", "--root", str(root), "--spec", spec]) == 0
    draft = tmp_path / "spec" / "releases" / "r3.yaml"
    assert yaml.safe_load(draft.read_text())["format"] == profiles.FORMAT


def test_a_version_1_state_record_is_read_and_the_next_write_migrates_it(tmp_path, capsys):
    """A record written before the run-time proof (version 1, no ``proof``) reads as one whose proof never
    ran, with no warning; the next verb that writes the record writes the current version."""
    root, spec = toy_root(tmp_path / "root"), write_spec(tmp_path / "spec")
    assert main(["apply", spec, "--root", str(root), "--no-verify"]) == 0
    record = root / STATE_FILE
    data = json.loads(record.read_text())
    data["version"] = 1
    for rec in data["specs"].values():
        del rec["proof"]
    record.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["status", "--root", str(root)]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "toy: applied for r1" in out and "unverified" not in out
    other = tmp_path / "spec" / "other.yaml"
    other.write_text(SPEC.replace("name: toy", "name: other").split("  - id: b")[0]
                     .replace("_p.stop(self, 1)", "_p.stop(self, 2)"))
    assert main(["apply", str(other), "--root", str(root), "--no-verify"]) == 0
    migrated = json.loads(record.read_text())
    assert migrated["version"] == VERSION and migrated["specs"]["toy"]["proof"] is None
    assert State.from_json(migrated, str(record)).specs["toy"].proof is None
    assert main(["unapply", "toy", "--root", str(root)]) == 0
    assert main(["unapply", "other", "--root", str(root)]) == 0
    assert not record.exists()
