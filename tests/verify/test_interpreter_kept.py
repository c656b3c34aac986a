"""The root's interpreter (issue 27, item 12): ``--python NAME`` is found on PATH, and the interpreter a
``--python`` named at apply is kept in the state record, so later verbs on a plain directory (a
``pip install --target`` root) need not repeat it."""
from __future__ import annotations

import json

from patchspec.cli import main
from patchspec.install.root import Root
from patchspec.install.state import STATE_FILE, load_state
from tests.verify_toy import MOD, install, make_venv, write_spec


def test_python_named_by_command_is_found_on_path_and_kept_for_later_verbs(tmp_path, capsys, monkeypatch):
    """Before: "--python toypython: not an executable file", and every later verb needed --python again."""
    python, _ = make_venv(tmp_path / "venv")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "toypython").symlink_to(python)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    root = tmp_path / "tree"
    install(root, {"vpkg/__init__.py": "", "vpkg/mod.py": MOD})
    spec = write_spec(tmp_path / "spec")
    assert main(["apply", spec, "--root", str(root), "--python", "toypython"]) == 0, capsys.readouterr().err
    assert "verified: 7 live" in capsys.readouterr().out
    assert load_state(Root.open(root)).specs["vtoy"].python == str(bin_dir / "toypython")
    assert main(["verify", spec, "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "7 live, 0 shown statically, 0 not live" in out and f"{bin_dir / 'toypython'} (" in out
    assert "kept from --python at apply)" in out
    assert main(["unapply", "vtoy", "--root", str(root)]) == 0
    assert not (root / ".patchspec").exists()


def test_a_command_not_on_path_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    root = tmp_path / "tree"
    install(root, {"vpkg/__init__.py": "", "vpkg/mod.py": MOD})
    assert main(["apply", write_spec(tmp_path / "spec"), "--root", str(root), "--python", "nopython"]) == 2
    err = capsys.readouterr().err
    assert "--python nopython: not an executable file nor a command on PATH" in err and len(err.splitlines()) == 1


def test_a_version_2_state_record_reads_as_one_no_python_named(tmp_path, capsys):
    python, site = make_venv(tmp_path / "venv")
    install(site, {"vpkg/__init__.py": "", "vpkg/mod.py": MOD})
    spec = write_spec(tmp_path / "spec")
    assert main(["apply", spec, "--root", str(site), "--no-verify"]) == 0
    data = json.loads((site / STATE_FILE).read_text())
    assert data["version"] == 3
    data["version"] = 2
    for rec in data["specs"].values():
        del rec["python"]
    (site / STATE_FILE).write_text(json.dumps(data))
    assert load_state(Root.open(site)).specs["vtoy"].python is None
    assert main(["verify", spec, "--root", str(site)]) == 0   # the venv's own interpreter, by its path
    assert "its venv)" in capsys.readouterr().out

