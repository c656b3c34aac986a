"""``patchspec record``: a spec drafted from a hand edit of installed files, or from upstream's change
between two releases, on real releases from PyPI; each draft proven, applied, checked and undone."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from patchspec.releases.cache import pypi_root
from patchspec.cli import main

SESSIONS = "requests/sessions.py"


@pytest.fixture(scope="module")
def requests_230():
    return pypi_root("requests==2.30.0")


@pytest.fixture
def site(tmp_path, requests_230):
    """A writable copy of requests 2.30.0 as pip installed it (RECORD included)."""
    root = tmp_path / "site"
    shutil.copytree(requests_230, root, ignore=shutil.ignore_patterns(".complete"))
    return root


def edit(root: Path, rel: str, old: str, new: str) -> bytes:
    path = root / rel
    text = path.read_text()
    assert text.count(old) == 1
    path.write_text(text.replace(old, new))
    return path.read_bytes()


def record(capsys, *args: str) -> tuple[int, str]:
    code = main(["record", *args])
    out = capsys.readouterr()
    return code, out.out + out.err


def spec_of(directory: Path, name: str) -> dict:
    return yaml.safe_load((directory / f"{name}.yaml").read_text())


def test_hand_edit_with_a_new_statement_becomes_an_insert_and_the_edit_the_applied_spec(site, tmp_path, capsys,
                                                                                         requests_230):
    edit(site, SESSIONS, "        if username and password:\n",
         "        if scheme.startswith('https'): username = None  # my fix\n        if username and password:\n")
    code, out = record(capsys, "proxy-auth", "--root", str(site), "--dir", str(tmp_path / "fix"))
    assert code == 0, out
    (target,) = spec_of(tmp_path / "fix", "proxy-auth")["targets"]
    assert target["function"] == "SessionRedirectMixin.rebuild_proxies"
    assert target["transforms"] == [{"insert_before": {"anchor": "if username and password: ...",
                                                       "code": "if scheme.startswith('https'): username = None"}}]
    assert (tmp_path / "fix" / "releases" / "requests-2.30.0.yaml").is_file()
    spec = str(tmp_path / "fix" / "proxy-auth.yaml")
    assert main(["check", spec, "--root", str(site)]) == 0
    assert "# patchspec: proxy-auth" in (site / SESSIONS).read_text()
    assert main(["unapply", "proxy-auth", "--root", str(site)]) == 0
    assert (site / SESSIONS).read_bytes() == (requests_230 / SESSIONS).read_bytes()


def test_no_edit_is_one_line_and_writes_nothing(site, tmp_path, capsys):
    code, out = record(capsys, "nothing", "--root", str(site), "--dir", str(tmp_path / "fix"))
    assert code == 2
    assert "no installed file differs from what its release installed" in out
    assert not (tmp_path / "fix").exists()


@pytest.mark.parametrize("how, said", [
    ("added", "was added by the edit"),
    ("deleted", "was deleted by the edit"),
])
def test_a_file_added_or_deleted_by_the_edit_is_refused_in_one_line(site, tmp_path, capsys, how, said):
    if how == "added":
        (site / "requests" / "extra.py").write_text("X = 1\n")
    else:
        (site / "requests" / "help.py").unlink()
    code, out = record(capsys, "files", "--root", str(site), "--dir", str(tmp_path / "fix"))
    assert code == 2 and said in out and len(out.strip().splitlines()) == 1
    assert not (tmp_path / "fix").exists()


def test_a_changed_signature_has_no_faithful_transform_and_names_its_lines(site, tmp_path, capsys):
    edit(site, SESSIONS, "    def rebuild_proxies(self, prepared_request, proxies):",
         "    def rebuild_proxies(self, prepared_request, proxies, strict=False):")
    code, out = record(capsys, "sig", "--root", str(site), "--dir", str(tmp_path / "fix"))
    assert code == 2
    assert "rebuild_proxies: its parameters changed (lines 303-" in out and "nothing was written" in out
    assert not (tmp_path / "fix").exists()


def test_an_install_without_record_hashes_needs_the_targets_named(site, tmp_path, capsys, requests_230):
    (next(site.glob("requests-*.dist-info")) / "RECORD").unlink()
    edit(site, SESSIONS, "        if username and password:\n",
         "        if scheme.startswith('https'): username = None\n        if username and password:\n")
    code, out = record(capsys, "norecord", "--root", str(site), "--dir", str(tmp_path / "fix"))
    assert code == 2 and "has no RECORD hashes" in out and "--target" in out
    code, out = record(capsys, "norecord", "--root", str(site), "--dir", str(tmp_path / "fix"),
                       "--target", f"{SESSIONS}:SessionRedirectMixin.rebuild_proxies")
    assert code == 0, out
    assert main(["unapply", "norecord", "--root", str(site)]) == 0
    assert (site / SESSIONS).read_bytes() == (requests_230 / SESSIONS).read_bytes()


def test_a_file_another_spec_patched_and_then_edited_is_refused(site, tmp_path, capsys):
    edit(site, SESSIONS, "        if username and password:\n",
         "        if scheme.startswith('https'): username = None\n        if username and password:\n")
    assert record(capsys, "first", "--root", str(site), "--dir", str(tmp_path / "one"))[0] == 0
    edit(site, SESSIONS, "        return new_proxies\n", "        new_proxies.pop('ftp', None)\n        return new_proxies\n")
    code, out = record(capsys, "second", "--root", str(site), "--dir", str(tmp_path / "two"))
    assert code == 2 and "is patched by first and was edited since" in out
    assert not (tmp_path / "two").exists()
