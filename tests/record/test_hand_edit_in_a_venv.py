"""``record`` of a hand edit as the README says it, on a root its own interpreter runs (a venv holding
httpx 0.28.1 and its dependencies, from PyPI), so that apply's run-time proof runs: the draft is applied
and proven live; and when the apply refuses, the root is left exactly as the user edited it."""
from __future__ import annotations

import shutil
from pathlib import Path

from patchspec.cli import main
from patchspec.releases.cache import pypi_root
from tests.verbs.test_apply import tree
from tests.verify_toy import make_venv

CONFIG = "httpx/_config.py"
DEPENDENCIES = ["anyio==4.16.0", "certifi==2026.10.19.post1", "h11==0.16.0", "httpcore==1.0.9", "idna==3.20",
                "typing_extensions==4.16.0"]


def _venv(tmp: Path, value: str = "7") -> tuple[Path, Path]:
    python, site = make_venv(tmp / "venv")
    for release in ["httpx==0.28.1", *DEPENDENCIES]:
        shutil.copytree(pypi_root(release), site, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".complete"))
    path = site / CONFIG
    text = path.read_text()
    assert text.count("DEFAULT_MAX_REDIRECTS = 20\n") == 1
    path.write_text(text.replace("DEFAULT_MAX_REDIRECTS = 20\n", f"DEFAULT_MAX_REDIRECTS = {value}\n"))
    return python, site


def _run(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out + out.err


def test_the_readme_flow_records_applies_and_proves_the_edit_live(tmp_path, capsys):
    """Before: exit 2, "httpx/_config.py is not as apply wrote it ... the change was undone" (the proof read
    the edited file through the view that shows it as pristine)."""
    _python, site = _venv(tmp_path)
    code, out = _run(capsys, "record", "redirects", "--root", str(site), "--dir", str(tmp_path / "fix"))
    assert code == 0, out
    assert "DEFAULT_MAX_REDIRECTS = 7  # patchspec: redirects\n" in (site / CONFIG).read_text()
    spec = str(tmp_path / "fix" / "redirects.yaml")
    assert _run(capsys, "check", spec, "--root", str(site))[0] == 0
    code, out = _run(capsys, "verify", "redirects", "--root", str(site))
    assert code == 0 and "1 live, 0 shown statically, 0 not live" in out, out


def test_a_refused_record_leaves_the_root_as_the_user_left_it(tmp_path, capsys):
    """An edit that raises when httpx is imported: the proof refuses and undoes the apply. Before: the
    edited file was left with a patchspec marker and no state record, and every later apply refused it."""
    _python, site = _venv(tmp_path, 'int("seven")')
    edited = {rel: digest for rel, digest in tree(site).items() if not rel.startswith(".patchspec/")}
    code, out = _run(capsys, "record", "redirects", "--root", str(site), "--dir", str(tmp_path / "fix"))
    assert code == 2 and "the change was undone" in out, out
    assert {rel: digest for rel, digest in tree(site).items() if not rel.startswith(".patchspec/")} == edited
    assert 'DEFAULT_MAX_REDIRECTS = int("seven")\n' in (site / CONFIG).read_text()
    assert not (tmp_path / "fix").exists()
    code, out = _run(capsys, "status", "--root", str(site))
    assert "nothing applied" in out, out
