"""A git ref unpacked into the cache carries the dist-info a build of it would install, so ``--release
auto`` pairs a source checkout (vllm-gaudi's tags and main) like an installed release. Versions follow
setuptools_scm's documented default (guess-next-dev, node-and-date); the repositories are made here."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from patchspec.cli import main
from patchspec.install import installed
from patchspec.releases import cache
from patchspec.verbs import reading
from tests.state.toy import RELEASES, tree, write_spec

SCM_PYPROJECT = '[project]\nname = "Toy_Pkg"\ndynamic = ["version"]\n\n[tool.setuptools_scm]\n'


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A git repository holding the toy package ``pkg`` 1.0, and a function to commit, tag and describe."""
    monkeypatch.setenv("PATCHSPEC_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "repo"
    path.mkdir()

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True,
                              text=True).stdout.strip()

    git("init", "-q")
    git("config", "user.email", "t@example.invalid")
    git("config", "user.name", "t")
    for rel, text in {**RELEASES["1.0"], "pyproject.toml": SCM_PYPROJECT}.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)

    def commit(n: int = 1) -> str:
        for _ in range(n):
            (path / "CHANGES").write_text((path / "CHANGES").read_text() + "x\n" if (path / "CHANGES").exists()
                                          else "x\n")
            git("add", "-A")
            git("commit", "-q", "-m", "change")
        return git("rev-parse", "--short", "HEAD")  # git describe's abbreviation, as setuptools_scm took it
    commit()
    return path, git, commit


def test_an_exact_tag_reports_the_tags_version(repo):
    path, git, _ = repo
    git("tag", "v1.0")
    root = cache.git_tag_root(path, "v1.0", "pkg")
    item = installed.scan(root)["pkg"]
    assert (item.distribution, item.version) == ("toy-pkg", "1.0")
    dist = root / "toy_pkg-1.0.dist-info"
    assert item.dist_info == dist and (dist / "top_level.txt").read_text() == "pkg\n"
    assert not (dist / "RECORD").exists()


@pytest.mark.parametrize("tag, after, want", [
    ("v0.27.0rc0", 3, "0.27.0rc1.dev3"),   # the last number bumped, a pre-release's too
    ("v2.0", 2, "2.1.dev2"),
    ("v2.0.0.post1", 1, "2.0.0.post2.dev1"),
    ("v3.0.dev0", 4, "3.0.dev4"),           # a .dev0 tag: the release it leads to
])
def test_commits_after_a_tag_report_the_next_dev_version(repo, tag, after, want):
    path, git, commit = repo
    git("tag", tag)
    node = commit(after)
    root = cache.git_tag_root(path, "HEAD", "pkg")
    assert installed.versions(root) == {"pkg": f"{want}+g{node}"}


def test_a_branch_is_keyed_by_its_commit_so_a_moved_branch_is_unpacked_anew(repo):
    path, git, commit = repo
    git("tag", "v1.0")
    git("branch", "-M", "main")
    first = cache.git_tag_root(path, "main", "pkg")
    node = commit()
    second = cache.git_tag_root(path, "main", "pkg")
    assert first != second
    assert installed.versions(first) == {"pkg": "1.0"}
    assert installed.versions(second) == {"pkg": f"1.1.dev1+g{node}"}


def test_a_static_version_is_taken_as_written_and_no_project_writes_no_dist_info(repo):
    path, git, commit = repo
    (path / "pyproject.toml").write_text('[project]\nname = "pkg"\nversion = "7.1"\n')
    commit()
    git("tag", "static")
    assert installed.versions(cache.git_tag_root(path, "static", "pkg")) == {"pkg": "7.1"}
    (path / "pyproject.toml").write_text("[tool.black]\n")
    commit()
    git("tag", "noproject")
    root = cache.git_tag_root(path, "noproject", "pkg")
    assert not list(root.glob("*.dist-info")) and installed.versions(root) == {}


@pytest.mark.parametrize("tag", ["release-candidate-1", None], ids=["tag-no-version", "no-tag"])
def test_a_ref_whose_version_cannot_be_told_is_still_unpacked(repo, tag):
    """The dist-info only helps pairing: a shallow clone or a tag that is no version must not make the
    source unreadable."""
    path, git, commit = repo
    if tag:
        git("tag", tag)
    commit()
    root = cache.git_tag_root(path, "HEAD", "pkg")
    assert (root / "pkg" / "__init__.py").is_file()
    assert not list(root.glob("*.dist-info")) and installed.versions(root) == {}


def test_a_source_root_is_paired_applied_and_restored_without_a_record(repo, tmp_path, capsys):
    """The toy spec's profiles pin pkg ==1.0 and ==2.0: the tag's build reports 1.0, so auto picks r1;
    apply, status and unapply read the dist-info that has no RECORD (pip never installed it)."""
    path, git, commit = repo
    (path / "pyproject.toml").write_text(SCM_PYPROJECT.replace("Toy_Pkg", "pkg"))
    commit()
    git("tag", "v1.0")
    root = tmp_path / "root"
    shutil.copytree(cache.git_tag_root(path, "v1.0", "pkg"), root, ignore=shutil.ignore_patterns(".complete"))
    spec = write_spec(tmp_path / "spec")
    before = tree(root)
    assert reading.check(spec, "auto", str(root)).code == 1
    assert main(["apply", spec, "--root", str(root)]) == 0
    assert main(["status", "--root", str(root)]) == 0
    assert "toy: applied for r1 (pkg 1.0)" in capsys.readouterr().out
    assert main(["unapply", spec, "--root", str(root)]) == 0
    assert tree(root) == before
