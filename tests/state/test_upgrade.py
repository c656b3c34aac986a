"""A new release installed over a patched root, as pip does it: requests 2.31.0 -> 2.32.3 with a real
``pip install --upgrade`` in a real venv, ``pip uninstall`` of a patched package, and vLLM 0.26.0 -> 0.30.0
roots from the wheels laid out as pip would (the files of the old RECORD removed, the new wheel's written)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from patchspec.cli import main
from patchspec.install.root import Root
from patchspec.install.state import load_state
from patchspec.releases import report
from patchspec.verbs import writing
from tests.state.toy import tree
from tests.verbs.test_apply import DEMO

REQUESTS_SPEC = str(Path(__file__).resolve().parents[1] / "fixtures" / "requests_spec" / "requests.yaml")
OURS = (".patchspec", "_patchspec_runtime")


def _pip(python: Path, *args: str) -> None:
    done = subprocess.run([str(python), "-m", "pip", *args, "-q", "--disable-pip-version-check"],
                          capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"pip {' '.join(args)} failed (no PyPI here?): {done.stderr.strip()[-300:]}")


@pytest.fixture
def venv(tmp_path):
    """``(python, site-packages)`` of a new venv with requests 2.31.0 installed from PyPI."""
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "venv")], check=True)
    python = tmp_path / "venv" / "bin" / "python"
    _pip(python, "install", "requests==2.31.0")
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    return python, Path(site)


def _imports(python: Path) -> str:
    return subprocess.run([str(python), "-c", "import requests; print(requests.__version__)"],
                          capture_output=True, text=True, check=True).stdout.strip()


def test_pip_install_upgrade_over_a_patched_venv(venv, capsys):
    python, site = venv
    writing.apply(REQUESTS_SPEC, "auto", str(site))
    assert "# patchspec: requests-get" in (site / "requests/api.py").read_text() and _imports(python) == "2.31.0"
    _pip(python, "install", "--upgrade", "requests==2.32.3")
    upgraded = {k: v for k, v in tree(site).items() if not k.startswith(OURS)}
    assert main(["status", "--root", str(site), "--json"]) == 1
    rows = {r.get("path"): r for r in json.loads(capsys.readouterr().out)["results"]}
    assert rows["requests/api.py"]["status"] == "replaced"
    assert rows[None]["applied_to"] == "requests 2.31.0" and rows[None]["installed"] == "requests 2.32.3"
    assert "re-applies" in rows["requests/api.py"]["todo"]
    assert main(["apply", REQUESTS_SPEC, "--root", str(site)]) == 0
    out = capsys.readouterr().out
    assert "dropped: requests/api.py: replaced by requests 2.32.3" in out and "patched: requests/api.py" in out
    assert load_state(Root.open(site)).specs["requests-get"].release == "v2.32.3"
    assert _imports(python) == "2.32.3"
    writing.unapply("requests-get", str(site))
    after = tree(site)
    # api.py's timestamp .pyc names the second pip wrote api.py; when unapply writes the same size back in
    # that second, the .pyc could pass for any text of that size, so it goes (Python compiles again): never
    # a different one, and every other byte as pip left it.
    pyc = next(k for k in upgraded if k.startswith("requests/__pycache__/api."))
    assert after.get(pyc, upgraded[pyc]) == upgraded[pyc]
    assert {k: v for k, v in after.items() if k != pyc} == {k: v for k, v in upgraded.items() if k != pyc}


def test_pip_uninstall_of_a_patched_package_then_status(venv, capsys):
    python, site = venv
    writing.apply(REQUESTS_SPEC, "auto", str(site))
    _pip(python, "uninstall", "-y", "requests")
    assert main(["status", "--root", str(site)]) == 1
    out = capsys.readouterr().out
    assert "installed now: requests not installed" in out and "removed: requests/api.py" in out
    assert main(["unapply", "requests-get", "--root", str(site)]) == 0
    assert "left as it is (removed with its package); record dropped: requests/api.py" in capsys.readouterr().out
    assert not any((site / name).exists() for name in OURS) and not (site / "requests").exists()


def _pip_layout(root: Path, release: Path, files: list[str]) -> None:
    """Install ``files`` of ``release`` as pip does over what is there: remove every file of the old RECORD,
    then write the new files and dist-info."""
    for dist in root.glob("*.dist-info"):
        for line in (dist / "RECORD").read_text().splitlines():
            (root / line.split(",")[0]).unlink(missing_ok=True)
        shutil.rmtree(dist)
    for rel in files:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(release / rel, root / rel)
    for dist in release.glob("*.dist-info"):
        shutil.copytree(dist, root / dist.name)


def test_vllm_0_26_to_0_30_over_a_patched_root(vllm_release, tmp_path, capsys):
    files = ["vllm/sequence.py", "vllm/v1/core/sched/scheduler.py"]
    root, fresh = tmp_path / "root", tmp_path / "fresh"
    _pip_layout(root, vllm_release("0.26.0"), files)
    _pip_layout(fresh, vllm_release("0.30.0"), files)
    writing.apply(DEMO, "auto", str(root))
    _pip_layout(root, vllm_release("0.30.0"), files)
    assert main(["check", DEMO, "--root", str(root)]) == 1  # the stale record is dropped: would apply on 0.30.0
    capsys.readouterr()
    drifted = [[record.to_json() for record in report.drift(DEMO, str(r), "auto", use_cache=False).records()]
               for r in (root, fresh)]
    assert drifted[0] == drifted[1]  # drift reads the installed 0.30.0 files, not the 0.26.0 pristine copies
    assert main(["apply", DEMO, "--root", str(root)]) == 0
    assert "dropped: vllm/sequence.py: replaced by vllm 0.30.0" in capsys.readouterr().out
    assert load_state(Root.open(root)).specs["demo"].release == "v0.30.0"
    writing.unapply("demo", str(root))
    assert tree(root) == tree(fresh)


def test_a_file_changed_after_install_is_a_recorded_warning_not_a_refusal(toy, capsys):
    root, spec = toy
    (root / "pkg/a.py").write_text((root / "pkg/a.py").read_text() + "# local change\n")
    assert main(["apply", spec, "--root", str(root)]) == 0
    warning = "warning: pkg/a.py differs from what pkg 1.0 installed (its RECORD sha256)"
    assert capsys.readouterr().out.startswith(warning)
    assert load_state(Root.open(root)).specs["toy"].warnings[0].startswith(warning)
    assert main(["status", "--root", str(root)]) == 0 and warning in capsys.readouterr().out
