"""The drift cache remembers rows per file; what a row says about the spec (where each transform is in the
spec file) is the spec's as read now, not that of the run that filled the cache."""
from __future__ import annotations

import json
import shutil

import pytest

from patchspec.cli import main
from tests.state.toy import toy_root, write_spec


def _spec_files(capsys, spec, root) -> set[tuple[str, int]]:
    capsys.readouterr()
    assert main(["drift", spec, "--root", str(root), "--json"]) == 4
    results = json.loads(capsys.readouterr().out)["results"]
    return {(r["spec_loc"]["file"], r["spec_loc"]["line"]) for r in results if r.get("spec_loc")}


@pytest.mark.parametrize("how", ["copied", "edited-above"])
def test_a_warm_cache_reports_the_spec_as_it_is_now(tmp_path, monkeypatch, capsys, how):
    monkeypatch.setenv("PATCHSPEC_CACHE", str(tmp_path / "cache"))
    root, spec = toy_root(tmp_path / "root"), write_spec(tmp_path / "spec")
    (root / "pkg" / "a.py").write_text("def target(self):\n    x = 1\n    other_call(1)\n")  # anchor gone
    cold = _spec_files(capsys, spec, root)
    assert cold and {f for f, _ in cold} == {spec}
    if how == "copied":
        shutil.copytree(tmp_path / "spec", tmp_path / "copy")
        again = str(tmp_path / "copy" / "toy.yaml")
        expected = {(again, line) for _, line in cold}
    else:
        again = spec
        path = tmp_path / "spec" / "toy.yaml"
        path.write_text("# a comment above\n" + path.read_text())
        expected = {(spec, line + 1) for _, line in cold}
    assert _spec_files(capsys, again, root) == expected
