"""``patchspec record``: a spec drafted from a hand edit of installed files, or from upstream's change
between two releases, on real releases from PyPI; each draft proven, applied, checked and undone."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from patchspec.cli import main
from patchspec.releases.cache import pypi_root

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
    assert "requests/sessions.py:SessionRedirectMixin.rebuild_proxies#0 insert_before: lines - -> 327" in out
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


def test_an_edit_outside_the_named_targets_is_not_dropped(site, tmp_path, capsys):
    edit(site, SESSIONS, "        if username and password:\n",
         "        if scheme.startswith('https'): username = None\n        if username and password:\n")
    edit(site, SESSIONS, "        return new_proxies\n",
         "        new_proxies.pop('ftp', None)\n        return new_proxies\n")
    code, out = record(capsys, "part", "--root", str(site), "--dir", str(tmp_path / "fix"),
                       "--target", f"{SESSIONS}:SessionRedirectMixin.rebuild_proxies")
    assert code == 0, out   # both edits are in the named definition
    edit(site, "requests/utils.py", "    proxy_keys = [\n", "    scheme = scheme.lower()\n    proxy_keys = [\n")
    edit(site, "requests/utils.py", "        d = d.items()\n", "        d = list(d.items())\n")   # dict_to_sequence
    code, out = record(capsys, "narrow", "--root", str(site), "--dir", str(tmp_path / "two"),
                       "--target", "requests/utils.py:select_proxy")
    assert code == 2 and "the draft does not say the change" in out
    assert not (tmp_path / "two").exists()


def test_an_edit_that_is_not_python_is_one_line(site, tmp_path, capsys):
    edit(site, SESSIONS, "        if username and password:\n", "        if username and password\n")
    code, out = record(capsys, "broken", "--root", str(site), "--dir", str(tmp_path / "fix"))
    assert code == 2 and "requests/sessions.py:327" in out and "not valid Python" in out
    assert len(out.strip().splitlines()) == 1


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
    edit(site, SESSIONS, "        return new_proxies\n",
         "        new_proxies.pop('ftp', None)\n        return new_proxies\n")
    code, out = record(capsys, "second", "--root", str(site), "--dir", str(tmp_path / "two"))
    assert code == 2 and "is patched by first and was edited since" in out
    assert not (tmp_path / "two").exists()


# --- the nine CVE fixes: --from the fixed release onto the vulnerable one --------------------------
# The releases are test_cve_fixes' (the hand-written specs of the same fixes), the verdicts its probes'.

TARGETS = {
    "requests-cve-2023-32681": ["requests/sessions.py:SessionRedirectMixin.rebuild_proxies"],
    "urllib3-cve-2023-43804": ["urllib3/util/retry.py:Retry.DEFAULT_REMOVE_HEADERS_ON_REDIRECT",
                               "urllib3/util/retry.py:Retry.__init__"],
    "urllib3-cve-2023-45803": ["urllib3/connectionpool.py:HTTPConnectionPool.urlopen",
                               "urllib3/poolmanager.py:PoolManager.urlopen",
                               "urllib3/_collections.py:HTTPHeaderDict._prepare_for_method_change"],
    "urllib3-cve-2024-37891": ["urllib3/util/retry.py:Retry.DEFAULT_REMOVE_HEADERS_ON_REDIRECT"],
    "jinja2-cve-2024-22195": ["jinja2/filters.py:do_xmlattr", "jinja2/filters.py:_space_re"],
    "jinja2-cve-2024-34064": ["jinja2/filters.py:do_xmlattr", "jinja2/filters.py:_attr_key_re"],
    "idna-cve-2024-3651": ["idna/core.py:valid_contextj", "idna/core.py:check_label", "idna/core.py:alabel",
                           "idna/idnadata.py:joining_types"],
    "tqdm-cve-2024-34062": ["tqdm/cli.py:cast"],
    "sqlparse-cve-2024-4340": ["sqlparse/sql.py:TokenList.flatten"],
}
# replace of an expression, set, replace/remove of statements, guard
DEFAULT_SLICE = {"requests-cve-2023-32681", "urllib3-cve-2023-43804", "tqdm-cve-2024-34062",
                 "sqlparse-cve-2024-4340"}


def verdict(fix: str, root: Path) -> str:
    from tests.cve_probes import probe

    return probe(fix, root)[0]


@pytest.mark.parametrize("fix", [pytest.param(f, marks=pytest.mark.record_all(default=f in DEFAULT_SLICE))
                                 for f in TARGETS])
def test_record_from_upstream_drafts_a_spec_that_applies_and_fixes_the_vulnerable_release(fix, tmp_path, capsys):
    from tests.specs.test_cve_fixes import FIXES

    upstream, vulnerable, _older = FIXES[fix]
    targets = TARGETS[fix]
    release = pypi_root(vulnerable)
    pypi_root(upstream)
    root = tmp_path / "site"
    shutil.copytree(release, root, ignore=shutil.ignore_patterns(".complete"))
    assert verdict(fix, root) == "VULNERABLE"
    args = ["rec", "--root", str(root), "--from", upstream, "--dir", str(tmp_path / "fix")]
    code, out = record(capsys, *args, *[a for t in targets for a in ("--target", t)])
    assert code == 0, out
    spec = str(tmp_path / "fix" / "rec.yaml")
    assert main(["check", spec, "--root", str(root)]) == 1   # drafted, the root untouched
    assert main(["apply", spec, "--root", str(root)]) == 0
    assert main(["check", spec, "--root", str(root)]) == 0
    assert verdict(fix, root) == "FIXED"
    assert main(["unapply", "rec", "--root", str(root)]) == 0
    for rel in {t.split(":")[0] for t in targets}:
        assert (root / rel).read_bytes() == (release / rel).read_bytes()


def test_the_cve_2023_32681_change_edited_by_hand_into_requests_2_30_0_is_recorded_and_replaced(
        site, tmp_path, capsys, requests_230):
    """A new user's edit: upstream's comment lines and its new test, typed into the installed file."""
    fix = "requests-cve-2023-32681"
    assert verdict(fix, site) == "VULNERABLE"
    edited = edit(site, SESSIONS, "        if username and password:\n",
                  "        # urllib3 handles proxy authorization for us in the standard adapter.\n"
                  "        # Avoid appending this to TLS tunneled requests where it may be leaked.\n"
                  "        if not scheme.startswith('https') and username and password:\n")
    assert verdict(fix, site) == "FIXED"
    code, out = record(capsys, "proxy-auth-tls", "--root", str(site), "--dir", str(tmp_path / "fix"))
    assert code == 0, out
    (target,) = spec_of(tmp_path / "fix", "proxy-auth-tls")["targets"]
    assert target["transforms"] == [{"replace": {"pattern": "username and password",
                                                 "by": "not scheme.startswith('https') and username and password"}}]
    spec = str(tmp_path / "fix" / "proxy-auth-tls.yaml")
    assert main(["check", spec, "--root", str(site)]) == 0
    assert (site / SESSIONS).read_bytes() != edited   # the spec's marked text, not the edit's bytes
    assert (tmp_path / "fix" / "proxy-auth-tls.edit" / SESSIONS).read_bytes() == edited   # kept, comments and all
    assert verdict(fix, site) == "FIXED"
    assert main(["unapply", "proxy-auth-tls", "--root", str(site)]) == 0
    assert (site / SESSIONS).read_bytes() == (requests_230 / SESSIONS).read_bytes()
    assert verdict(fix, site) == "VULNERABLE"


def test_a_root_with_another_spec_applied_records_an_edit_of_another_file(site, tmp_path, capsys, requests_230):
    edit(site, SESSIONS, "        if username and password:\n",
         "        if scheme.startswith('https'): username = None\n        if username and password:\n")
    assert record(capsys, "first", "--root", str(site), "--dir", str(tmp_path / "one"))[0] == 0
    edit(site, "requests/utils.py", "    proxy_keys = [\n", "    scheme = scheme.lower()\n    proxy_keys = [\n")
    code, out = record(capsys, "second", "--root", str(site), "--dir", str(tmp_path / "two"))
    assert code == 0, out
    (target,) = spec_of(tmp_path / "two", "second")["targets"]
    assert (target["file"], target["function"]) == ("requests/utils.py", "select_proxy")
    for spec in (tmp_path / "one" / "first.yaml", tmp_path / "two" / "second.yaml"):
        assert main(["check", str(spec), "--root", str(site)]) == 0
    for name in ("second", "first"):
        assert main(["unapply", name, "--root", str(site)]) == 0
    for rel in (SESSIONS, "requests/utils.py"):
        assert (site / rel).read_bytes() == (requests_230 / rel).read_bytes()


def test_a_release_the_index_has_no_wheel_or_sdist_of_is_one_line(site, tmp_path, capsys):
    metadata = next(site.glob("requests-*.dist-info")) / "METADATA"
    metadata.write_text(metadata.read_text().replace("Version: 2.30.0", "Version: 2.30.0.post987", 1))
    edit(site, SESSIONS, "        if username and password:\n",
         "        if scheme.startswith('https'): username = None\n        if username and password:\n")
    code, out = record(capsys, "gone", "--root", str(site), "--dir", str(tmp_path / "fix"))
    assert code == 2 and len(out.strip().splitlines()) == 1
    assert "requests 2.30.0.post987's own files from the index (its wheel or sdist) and there are none" in out
    assert not (tmp_path / "fix").exists()


def test_from_with_before_carries_upstreams_change_onto_an_older_release(tmp_path, capsys):
    release = pypi_root("requests==2.28.2")
    root = tmp_path / "site"
    shutil.copytree(release, root, ignore=shutil.ignore_patterns(".complete"))
    code, out = record(capsys, "carried", "--root", str(root), "--from", "requests==2.31.0", "--before", "2.30.0",
                       "--target", f"{SESSIONS}:SessionRedirectMixin.rebuild_proxies", "--dir", str(tmp_path / "fix"))
    assert code == 0, out
    assert (tmp_path / "fix" / "releases" / "requests-2.28.2.yaml").is_file()
    assert main(["apply", str(tmp_path / "fix" / "carried.yaml"), "--root", str(root)]) == 0
    assert verdict("requests-cve-2023-32681", root) == "FIXED"


def test_from_names_what_upstream_left_as_it_was_and_refuses_what_no_transform_says(tmp_path, capsys):
    release = pypi_root("urllib3==2.2.1")
    pypi_root("urllib3==2.2.2")
    root = tmp_path / "site"
    shutil.copytree(release, root, ignore=shutil.ignore_patterns(".complete"))
    retry = "urllib3/util/retry.py"
    code, out = record(capsys, "cap", "--root", str(root), "--from", "urllib3==2.2.2", "--dir", str(tmp_path / "a"),
                       "--target", f"{retry}:Retry.DEFAULT_REMOVE_HEADERS_ON_REDIRECT",
                       "--target", f"{retry}:Retry.__init__")
    assert code == 0, out
    assert f"note: {retry}:Retry.__init__: the change leaves it as it was; nothing to carry" in out
    code, out = record(capsys, "new", "--root", str(root), "--from", "urllib3==2.2.2", "--dir", str(tmp_path / "b"),
                       "--target", f"{retry}:Retry.new")
    assert code == 2 and len(out.strip().splitlines()) == 1
    assert "Retry.new: its return annotation changed (lines 247-" in out and "nothing was written" in out
    assert not (tmp_path / "b").exists()


def test_from_a_distribution_the_root_does_not_hold_is_one_line(site, tmp_path, capsys):
    code, out = record(capsys, "none", "--root", str(site), "--from", "idna==3.7", "--dir", str(tmp_path / "fix"),
                       "--target", "idna/core.py:alabel")
    assert code == 2 and "idna is not installed under the root" in out and len(out.strip().splitlines()) == 1
    code, out = record(capsys, "none", "--root", str(site), "--from", "requests==2.31.0",
                       "--dir", str(tmp_path / "fix"))
    assert code == 2 and "--from needs --target FILE:QUALNAME" in out
    assert not (tmp_path / "fix").exists()
